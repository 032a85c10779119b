"""LogiQA: the shipped English test set and the strict multiple-choice grader."""

from collections import Counter

import pytest

from tir_envs.data.loaders import DatasetError
from tir_envs.data.logiqa import LOGIQA_COUNT, load_logiqa, parse_logiqa
from tir_envs.answers.choice import extract_choice
from tir_envs.answers.response import final_response
from tir_envs.rewards.choice import ChoiceReward, grade_choice
from tir_envs.task import Task


def test_shipped_test_set_loads_651_tasks_with_labelled_options():
    tasks = load_logiqa()
    assert len(tasks) == LOGIQA_COUNT == 651
    assert Counter(t.answer for t in tasks) == {"A": 132, "B": 159, "C": 179, "D": 181}
    for t in tasks:
        lines = t.question.split("\n")
        assert [line[:3] for line in lines[-4:]] == ["A. ", "B. ", "C. ", "D. "]
        assert t.meta["domain"] == "multiple_choice" and t.meta["tool"] is None
        assert len(t.meta["options"]) == 4 and all(t.meta["options"])
    assert len(load_logiqa(limit=3)) == 3


def test_options_listed_out_of_order_are_keyed_by_their_labels():
    # question 172 lists A, C, B, D; its gold "c" is the option labelled C (solved by hand)
    task = load_logiqa()[172]
    assert task.answer == "C"
    assert task.meta["options"][2] == "The money is on Tuesday."
    assert task.meta["options"][1] == "Lee is on Tuesday."


def test_parse_names_the_line_of_a_malformed_record():
    good = "\nb\nPassage.\nQuestion?\nA.one\nB.two\nC.three\nD.four\n"
    assert parse_logiqa(good)[0] == {"context": "Passage.", "query": "Question?",
                                     "options": ["one", "two", "three", "four"], "answer": "B"}
    with pytest.raises(DatasetError, match="x.txt:9"):
        parse_logiqa(good + "\ne\nP\nQ\nA.1\nB.2\nC.3\nD.4\n", "x.txt")


@pytest.mark.parametrize("response, letter", [
    (r"\boxed{B}", "B"), ("B", "B"), ("(B)", "B"), ("B.", "B"), ("b", "B"),
    ("the answer is B", "B"), ("The answer is (c).", "C"), ("Answer: D", "D"),
    (r"So the answer is $\boxed{\text{B}}$.", "B"), (r"\boxed{B. Lee is on Tuesday.}", "B"),
    (r"\boxed{(D)}", "D"), (r"\boxed{Option C}", "C"), ("The correct option is D.", "D"),
    (r"\boxed{A} as shown, so \boxed{A}", "A"),
    (r"Option A gives \boxed{12}, too many, so \boxed{B}", "B"),
    (r"The sum is \boxed{12}, so the answer is C.", "C"),
    # several letters, or none: no choice
    (r"\boxed{B, C}", None), ("B or C", None), ("the answer is B or C", None),
    (r"\boxed{B} or maybe \boxed{C}", None), (r"\boxed{AB}", None), ("Answer: A and B", None),
    ("The answer is B. No wait, the answer is C.", None), (r"\boxed{E}", None),
    (r"\boxed{B, C}. The answer is B.", None), ("(A) (B)", None),
    ("I think A is wrong, and so is D.", None), ("The answer is a contradiction.", None),
    ("", None), (None, None),
])
def test_extract_choice(response, letter):
    assert extract_choice(response) == letter


def test_grade_choice_is_strict_and_checks_the_gold():
    assert grade_choice(r"\boxed{C}", "c")
    assert not grade_choice(r"\boxed{C, D}", "C")
    with pytest.raises(ValueError, match="one letter"):
        grade_choice("A", "AB")


def test_choice_reward_reads_the_final_answer_not_the_reasoning():
    task = Task("q", "question", answer="B")
    reward = ChoiceReward()
    right = reward.score(task, None, final_response(
        ["<think>A? no, \\boxed{A} is wrong</think>So \\boxed{B}."]))
    assert (right.value, right.correct) == (1.0, True)
    wrong = reward.score(task, None, final_response([r"\boxed{B} \boxed{A}"]))
    assert (wrong.value, wrong.answered, wrong.components["has_answer"]) == (0.0, False, 0.0)
    with pytest.raises(ValueError, match="task.answer"):
        reward.score(Task("q", "question", answer=None), None, "B")
