"""Issue 21, item 3: answers that hedge never pay, answers of another type than the gold never
pay, and honest answers still do.  Each row is graded end to end (extraction from the response,
then a real grader pool) and, for the record in docs/mathcode.md, by Math-Verify alone.

Rows: (response, gold, this grader's verdict, Math-Verify's verdict on the same pair)."""

from __future__ import annotations

import contextlib

import pytest

from tir_envs.protocols import math_protocol
from tir_envs.protocols.autotir import AutoTIRProtocol
from tir_envs.rewards.autotir import AutoTIRReward
from tir_envs.answers.math import extract_final_answer
from tir_envs.rewards.math import GraderPool, MathReward
from tir_envs.rewards.math.extract import graded_texts
from tir_envs.rewards.math.hedge import as_list, has_disjunction, hedge_reason
from tir_envs.rewards.math.verify import verify_pair
from tir_envs.task import Task
from tir_envs.trajectory import Trajectory

HEDGES = [  # each must score 0
    (r"\boxed{41 \lor 42}", "42", False, True),
    (r"\boxed{42 \lor 41}", "42", False, False),
    (r"\boxed{41 \vee 42}", "42", False, True),
    (r"\boxed{41 || 42}", "42", False, True),
    ("\\boxed{41 ∨ 42}", "42", False, True),
    (r"\boxed{x = 41 \lor x = 42}", "42", False, True),
    (r"\boxed{41 \text{ or } 42}", "42", False, False),
    (r"\boxed{42 or 41}", "42", False, False),
    (r"\boxed{\text{either } 41 \text{ or } 42}", "42", False, False),
    (r"\boxed{\text{even or odd}}", r"\text{even}", False, False),
    (r"\boxed{41, 42}", "42", False, False),
    (r"\boxed{\{41, 42\}}", "42", False, False),
    (r"\boxed{41} or \boxed{42}", "42", False, False),
    (r"\boxed{40}, \boxed{41}, \boxed{42}", "42", False, False),
    (r"\boxed{40 \le x \le 45}", "42", False, False),
    (r"\boxed{41 < x < 43}", "42", False, False),
    (r"\boxed{x \geq 42}", "42", False, False),
    (r"\boxed{[40, 45]}", "42", False, False),
    (r"\boxed{42 \pm 1}", "42", False, False),
    (r"\boxed{42 \pm 0}", "42", False, True),
    (r"\boxed{42 \mp 1}", "42", False, False),
    (r"\boxed{\pm 3}", "3", False, False),
    (r"\boxed{41 = 42}", "42", False, True),
    (r"\boxed{x = 41 = 42}", "42", False, True),
    (r"\boxed{x \in \{41, 42\}}", "42", False, False),
    (r"\boxed{42 \approx 41}", "42", False, True),
    (r"\boxed{41 \sim 42}", "42", False, True),
    (r"\boxed{41 \overset{?}{=} 42}", "42", False, True),
    (r"\boxed{41 \\ 42}", "42", False, True),
    (r"\boxed{\begin{cases} 41 \\ 42 \end{cases}}", "42", False, True),
    (r"\boxed{41 \mid 42}", "42", False, True),
    (r"\boxed{41 | 42}", "42", False, True),
    (r"\boxed{41 \& 42}", "42", False, True),
    (r"\boxed{41 \cup 42}", "42", False, True),
    (r"\boxed{41 \text{ (or 42)}}", "42", False, False),
    # a second value in a subscript, which graders drop (issue 43)
    (r"\boxed{42_{41}}", "42", False, True),
    (r"\boxed{42_41}", "42", False, True),
    (r"\boxed{(42)_{41}}", "42", False, False),
    # type: an interval, a set, a tuple and a list of solutions are different answers
    (r"\boxed{-1, 1}", "(-1, 1)", False, True),
    (r"\boxed{\{-1, 1\}}", "(-1, 1)", False, True),
    (r"\boxed{-1 \text{ or } 1}", "(-1, 1)", False, True),
    (r"\boxed{-1 < x < 1}", "(-1, 1)", False, False),
    (r"\boxed{(-2, 1)}", "1, -2", False, True),
    (r"\boxed{(1, -2)}", "1, -2", False, True),
    (r"\boxed{1, 2}", "(1, 2)", False, True),
    (r"\boxed{x = 1, y = 2}", "(1, 2)", False, True),
    (r"\boxed{1, 2, 3}", "(1, 2, 3)", False, True),
    (r"\boxed{(1, 2, 3)}", "1, 2, 3", False, True),
    (r"\boxed{1 \lor -2 \lor 3}", "1, -2", False, False),
    (r"\boxed{1 \text{ or } 5}", "1, -2", False, False),
    # every choice letter
    (r"\boxed{\text{(A) or (C)}}", r"\text{(C)}", False, False),
    (r"\boxed{A \lor C}", r"\text{(C)}", False, False),
    (r"\boxed{A, B, C, D}", r"\text{(C)}", False, False),
    (r"\boxed{ABCD}", r"\text{(C)}", False, False),
]

LEGIT = [  # each must still score 1 (or stay wrong where both graders agree it is)
    (r"\boxed{42}", "42", True, True),
    (r"\boxed{x = 42}", "42", True, True),
    (r"\boxed{42} and \boxed{42}", "42", True, True),
    (r"\boxed{\frac{84}{2} = 42}", "42", True, True),
    (r"\boxed{x = 2 \cdot 21 = 42}", "42", True, True),
    (r"\boxed{(-1, 1)}", "(-1, 1)", True, True),
    (r"\boxed{\left(-1, 1\right)}", "(-1,1)", True, True),
    (r"\boxed{(-1, 0] \cup (0, 1)}", "(-1, 1)", True, True),
    (r"\boxed{(1, 2)}", "(1, 2)", True, True),
    (r"\boxed{(3, \frac{\pi}{2})}", r"\left( 3, \frac{\pi}{2} \right)", True, True),
    (r"\boxed{(1, 2, 3)}", "(1, 2, 3)", True, True),
    (r"\boxed{1, -2}", "1, -2", True, True),
    (r"\boxed{-2, 1}", "1,-2", True, True),
    (r"\boxed{\{-2, 1\}}", "1, -2", True, True),
    (r"\boxed{x = 1 \text{ or } x = -2}", "1, -2", True, True),
    (r"\boxed{1 \lor -2}", "1, -2", True, False),
    (r"\boxed{-2} or \boxed{1}", "1, -2", True, True),
    (r"\boxed{[-2, 1]}", "1, -2", True, False),
    (r"\boxed{(2, 2), (6, 2)}", "(2, 2), (6, 2)", True, True),
    (r"\boxed{[-2, 7]}", r"x \in [-2,7]", True, True),
    (r"\boxed{-2 \le x \le 7}", r"x \in [-2,7]", False, False),
    (r"\boxed{(2, \infty)}", r"(2,\infty)", True, True),
    (r"\boxed{x > 2}", r"(2,\infty)", False, False),
    (r"\boxed{\left[ \frac{\pi^2}{8}, \frac{5 \pi^2}{4} \right]}",
     r"\left[ \frac{\pi^2}{8}, \frac{5 \pi^2}{4} \right]", True, True),
    (r"\boxed{1 \pm \sqrt{19}}", r"1 \pm \sqrt{19}", True, True),
    (r"\boxed{1+\sqrt{19}, 1-\sqrt{19}}", r"1 \pm \sqrt{19}", True, True),
    (r"\boxed{\{1\pm\sqrt{5}, -2\}}", r"\{1+\sqrt{5}, 1-\sqrt{5}, -2\}", True, True),
    (r"\boxed{41 \lor 42}", r"41 \lor 42", True, True),
    (r"\boxed{42 \text{ or } 41}", r"41 \lor 42", True, False),
    (r"\boxed{3 \le 4}", r"3 \le 4", True, True),
    (r"\boxed{x > 2}", "x > 2", True, True),
    (r"\boxed{\{3\}}", "3", True, True),
    (r"\boxed{|-3|}", "3", True, True),
    (r"\boxed{\frac{1}{3} \approx 0.333}", r"\frac{1}{3}", True, True),
    (r"\boxed{\begin{pmatrix} 1 \\ -2 \end{pmatrix}}", r"\begin{pmatrix} 1 \\ -2 \end{pmatrix}",
     True, True),
    (r"\boxed{\max(41, 42)}", "42", True, True),
    # subscripts that name something: a variable, a base the gold writes too
    (r"\boxed{x_1 = 42}", "42", True, True),
    (r"\boxed{1011_2}", "1011_2", True, True),
    # from Math-Verify's own suite: relations, arrays and unions that are no hedge
    (r"\boxed{x \neq 3}", "x != 3", True, True),
    (r"\boxed{\left[\begin{array}{cc}1 & 2 \\3 & 4\end{array}\right]}",
     r"\begin{pmatrix}1 & 2 \\3 & 4\end{pmatrix}", True, True),
    (r"\boxed{z \in \left[-\frac{3}{2}, -1\right] \cup \left[1, \frac{3}{2}\right]}",
     r"1\leq|z|\leq \frac{3}{2}", True, True),
    # ... and its verdicts this grader does not share (docs/mathcode.md)
    (r"\boxed{x = 5+5+1 = 7 =11}", "x = 11", False, True),
    (r"\boxed{x=1/3\approx1.3}", "1/3", False, True),
    (r"\boxed{\{1,3\}}", "(1,3)", False, True),
    (r"\boxed{\text{(C)}}", r"\text{(C)}", True, True),
    (r"\boxed{C}", r"\text{(C)}", True, True),
    (r"\boxed{\text{north}}", r"\text{North}", True, True),
    (r"\boxed{\text{Oregon}}", r"\text{Oregon}", True, True),
]


@pytest.fixture(scope="module")
def pool():
    with GraderPool(workers=2, timeout_s=30) as p:
        yield p


def _verdicts(pool, rows):
    grades = pool.grade_many([(extract_final_answer(r), g) for r, g, _, _ in rows])
    return [(r, g, want, grade.correct, grade.detail)
            for (r, g, want, _), grade in zip(rows, grades) if grade.correct is not want]


def test_no_hedge_pays(pool):
    assert not any(want for _, _, want, _ in HEDGES)
    assert _verdicts(pool, HEDGES) == []


def test_honest_answers_of_the_gold_type_still_pay(pool):
    assert sum(want for _, _, want, _ in LEGIT) >= 30
    assert _verdicts(pool, LEGIT) == []


def test_the_worker_check_applies_the_same_rules():
    """``verify_pair`` (what a worker runs) on the texts the pool sends gives the pool's
    verdict on every row, also where the pool settles a hedge without a worker."""
    wrong = [(r, g) for r, g, want, _ in HEDGES + LEGIT
             if all(verify_pair(text, g) for text in graded_texts(extract_final_answer(r), g))
             is not want]
    assert wrong == []


@contextlib.contextmanager
def _math_verify_unchanged():
    """Math-Verify's own comparisons, without the rules ``verify`` installs in this process."""
    from math_verify import grader

    saved = grader.sympy_numeric_eq, grader.sympy_compare_sets
    grader.sympy_numeric_eq = getattr(saved[0], "original", saved[0])
    grader.sympy_compare_sets = getattr(saved[1], "original", saved[1])
    try:
        yield
    finally:
        grader.sympy_numeric_eq, grader.sympy_compare_sets = saved


@pytest.mark.parametrize("rows", [HEDGES, LEGIT], ids=["hedges", "legit"])
def test_math_verify_alone_as_documented(rows):
    """The Math-Verify column is what docs/mathcode.md reports; it holds for the installed
    version (a failure here means the comparison table needs updating)."""
    from math_verify import parse, verify

    with _math_verify_unchanged():
        differ = [(r, g) for r, g, _, mv in rows if verify(parse(f"${g}$"), parse(r)) is not mv]
    assert differ == []


def test_several_boxes_against_one_value_are_each_graded(pool):
    hedge = extract_final_answer(r"so $\boxed{41}$ or $\boxed{42}$")
    assert hedge.boxes == ("41", "42")
    assert not pool.grade(hedge, "42").correct and not pool.grade(hedge, "41").correct
    assert pool.grade(extract_final_answer(r"\boxed{42} and \boxed{42.0}"), "42").correct
    many = extract_final_answer(", ".join(f"\\boxed{{{42 + i / 10**9}}}" for i in range(9)))
    grade = pool.grade(many, "42")
    assert len(many.boxes) == 9 and not grade.correct and grade.status == "quick"
    # a box before other text is working; only the final group counts
    assert pool.grade(extract_final_answer(r"\boxed{41}. Checking again, \boxed{42}"), "42")


@pytest.mark.parametrize("text, found", [
    (r"41 \lor 42", True), (r"41 \vee 42", True), ("41 || 42", True), (r"a \text{ or } b", True),
    ("either 1 or 2", True), ("41 ∨ 42", True), (r"\|v\|", False), ("||x||", False),
    (r"\text{color}", False), (r"\text{North}", False), (r"\left(1, 2\right)", False),
    (r"\frac{41}{42}", False), ("41 | 42", True), ("|x| + |y|", False), (r"41 \mid 42", True),
    (r"\{x \mid x > 0\}", False), (r"41 \& 42", True),
])
def test_disjunctions_are_found_by_their_words_and_symbols(text, found):
    assert has_disjunction(text) is found


def test_a_disjunction_against_a_list_gold_is_read_as_the_list():
    assert as_list(r"x = 1 \text{ or } x = -2") == "x = 1, x = -2"
    assert as_list(r"1 \lor -2 \lor 3") == "1, -2, 3"
    assert as_list("either 1 or 2") == "1, 2"
    assert hedge_reason(r"1 \lor -2", "1, -2", True) is None
    assert hedge_reason(r"1 \lor -2", "1", False).startswith("hedge")


@pytest.mark.parametrize("action, correct", [
    (r"So the answer is $\boxed{42}$.", True),
    (r"So the answer is $\boxed{41 \lor 42}$.", False),
    (r"So $\boxed{41}$ or $\boxed{42}$.", False),
    (r"It lies in $\boxed{40 \le x \le 45}$.", False),
])
def test_math_reward_and_autotir_math_domain(pool, action, correct):
    task = Task("q", "question", "42", {"domain": "math"})
    torl = math_protocol("torl")
    assert torl.grade(MathReward(grader=pool), task, [action], Trajectory()).value == \
        float(correct)
    autotir = AutoTIRProtocol().grade(AutoTIRReward(grader=pool), task, [action], Trajectory())
    assert autotir.correct is correct
