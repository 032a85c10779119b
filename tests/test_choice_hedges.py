"""Issue 21, item 3 for multiple choice (LogiQA, AutoTIR's multiple-choice domain): naming
several letters, or every letter, in any form scores 0 whatever the gold; one letter in any
of its usual forms still scores 1.  Rows: (final response, the letter it chooses or None)."""

from __future__ import annotations

import pytest

from tir_envs.answers.choice import extract_choice
from tir_envs.rewards.choice import ChoiceReward
from tir_envs.task import Task

HEDGES = [
    r"\boxed{A, B, C, D}", r"\boxed{ABCD}", r"\boxed{A/B/C/D}", r"\boxed{A \lor B}",
    r"\boxed{A \vee B}", r"\boxed{A || B}", r"\boxed{A \& B}", r"\boxed{A + B}",
    r"\boxed{A \text{ or } B}", r"\boxed{\text{A or B}}", r"\boxed{either A or B}",
    r"\boxed{A and B}", r"\boxed{\{A, B\}}", r"\boxed{(A)(B)}", r"\boxed{B C}",
    r"\boxed{A}\boxed{B}\boxed{C}\boxed{D}", r"\boxed{B} or \boxed{C}", r"\boxed{B}/C",
    r"\boxed{B} (or possibly C)", "The answer is A, B, C or D", "The answer is A or B",
    "The answer is B (or C)", "The answer is B (or possibly C)", "The answer is (A)(B)",
    "Answer: A\nAnswer: B", "The answer is A; the answer is B", "answer: A,B,C,D",
    "A B C D", "ABCD", "A or B", "A, B",
]

LEGIT = [
    (r"\boxed{B}", "B"), (r"\boxed{(B)}", "B"), (r"\boxed{\text{B}}", "B"), (r"\boxed{B.}", "B"),
    (r"\boxed{B. The premise is false}", "B"), (r"\boxed{B. A valid argument}", "B"),
    (r"\boxed{(B) The argument}", "B"), (r"\boxed{B} \boxed{B}", "B"), ("Answer: B", "B"),
    ("The answer is (B).", "B"), ("The answer is B because C is false", "B"),
    ("The answer is B. C is wrong", "B"), ("The answer is B, as C is wrong", "B"),
    (r"\boxed{B}. C is wrong", "B"), (r"\boxed{B. Option or A claim}", "B"), ("B", "B"),
    ("(B)", "B"), ("answer is b", "B"),
]


@pytest.mark.parametrize("response", HEDGES)
def test_several_letters_choose_nothing(response):
    assert extract_choice(response) is None
    reward = ChoiceReward()
    for gold in "ABCD":
        assert reward.score(Task("q", "question", answer=gold), None, response).value == 0.0


@pytest.mark.parametrize("response, letter", LEGIT)
def test_one_letter_still_pays(response, letter):
    assert extract_choice(response) == letter
    result = ChoiceReward().score(Task("q", "question", answer=letter), None, response)
    assert (result.value, result.correct) == (1.0, True)
