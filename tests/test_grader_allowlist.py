"""Issue 29, item 4: an answer may hold only what an answer of the gold's type may hold.

The hedges of the issue (forms no deny-list named) are refused against single-valued golds, by
the pool and by the worker's own check; unknown commands and scripts are refused whatever they
wrap (property); and every shipped math gold passes against itself, so no honest form of the
benchmarks is refused.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from tir_envs.data.math import load_math_tasks
from tir_envs.answers.math import extract_final_answer
from tir_envs.rewards.math import GraderPool
from tir_envs.rewards.math.extract import is_multi_valued
from tir_envs.rewards.math.hedge import read_pair
from tir_envs.rewards.math.normalize import prepare_answer
from tir_envs.rewards.math.verify import verify_pair

# (answer, gold): each must score 0 (the list, and its neighbours)
HEDGES = [
    ("41 ⋁ 42", "42"), (r"41 \to 42", "42"), (r"41 \rightarrow 42", "42"),
    (r"41 \Rightarrow 42", "42"), (r"41 \implies 42", "42"), (r"41 \iff 42", "42"),
    (r"41 \equiv 42", "42"), ("41 := 42", "42"),
    (r"\cancel{41} 42", "42"), (r"\color{white}{41} 42", "42"), (r"\tag{41} 42", "42"),
    (r"41 \cr 42", "42"), (r"42 \in \{41,42\}", "42"), (r"41 \wedge 42", "42"),
    (r"41 \land 42", "42"), (r"41 \cap 42", "42"), ("41 ｜ 42", "42"), ("41 ∣ 42", "42"),
    ("41 或 42", "42"), ("41 或者 42", "42"), (r"\phantom{41} 42", "42"),
    (r"\hphantom{41}42", "42"), (r"41 \mapsto 42", "42"), (r"41 \longrightarrow 42", "42"),
    (r"\underbrace{41}_{42}", "42"), (r"41 \neg 42", "42"), (r"41 \not= 42", "42"),
    (r"41 \text{ vs } 42", "42"), (r"41 \text{ and } 42", "42"), (r"41 \oplus 42", "42"),
    (r"41 \therefore 42", "42"), (r"\substack{41 \\ 42}", "42"), ("41 → 42", "42"),
    ("41 ⇒ 42", "42"), ("41 ; 42", "42"), (r"41 \setminus 42", "42"),
    (r"\xrightarrow{41} 42", "42"), (r"41\;\mathrm{or}\;42", "42"), (r"41 \mid 42", "42"),
]


@pytest.fixture(scope="module")
def pool():
    with GraderPool(workers=2, timeout_s=30) as p:
        yield p


def _refused(pred: str, gold: str) -> str | None:
    pred, gold = prepare_answer(pred), prepare_answer(gold)
    return read_pair(pred, gold, is_multi_valued(gold))[2]


@pytest.mark.parametrize("pred, gold", HEDGES)
def test_unlisted_hedges_are_refused(pred, gold):
    assert _refused(pred, gold), f"{pred!r} was not refused against {gold!r}"
    assert not verify_pair(pred, gold)


def test_no_hedge_pays_through_the_pool(pool):
    grades = pool.grade_many([(extract_final_answer(f"\\boxed{{{p}}}"), g) for p, g in HEDGES])
    assert [(p, g) for (p, g), grade in zip(HEDGES, grades) if grade.correct] == []


@settings(max_examples=300, deadline=None)
@given(command=st.from_regex(r"\\[a-zA-Z]{2,9}", fullmatch=True),
       wrapped=st.sampled_from(["{41} 42", " 41 42", "{41}{42}", "_{41} 42", " 42"]))
def test_any_command_the_gold_type_does_not_allow_is_refused(command, wrapped):
    """Property: a command outside the allow-list of a plain-number gold is refused, whatever
    it wraps; one inside it is never the reason for a refusal."""
    from tir_envs.rewards.math.allowed import _COMMANDS

    reason = _refused(command + wrapped, "42")
    if command not in _COMMANDS:
        assert reason and command in reason
    else:
        assert reason is None or command not in reason


@settings(max_examples=200, deadline=None)
@given(ch=st.characters(blacklist_categories=("Cs",), min_codepoint=0x80))
def test_any_character_of_another_script_between_candidates_is_refused(ch):
    from tir_envs.rewards.math.allowed import _UNICODE

    reason = _refused(f"41 {ch} 42", "42")
    if ch not in _UNICODE and not ch.isspace():
        assert reason


@pytest.mark.parametrize("suite", ["math500", "aime2024", "aime2025", "gsm8k"])
def test_every_shipped_gold_is_allowed_against_itself_and_its_variants(suite):
    golds = {t.answer for t in load_math_tasks(suite)}
    refused = [g for g in golds if _refused(g, g)]
    assert refused == []
    spaced = [g for g in golds if _refused(f"x = {g}", g) and not is_multi_valued(g)
              and "=" not in g and "\\in" not in g and "<" not in g and ">" not in g
              and "\\le" not in g and "\\ge" not in g]
    assert spaced == []
