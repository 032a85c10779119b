"""Multiple-choice grading: the gold letter against the one the policy chose
(``tir_envs.answers.choice`` reads it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tir_envs.answers.choice import extract_choice
from tir_envs.rewards.base import Reward, RewardResult

if TYPE_CHECKING:
    from tir_envs.task import Task
    from tir_envs.trajectory import Trajectory

def gold_letter(gold: object, letters: str = "ABCD") -> str:
    """The gold option as an upper-case letter, or a ValueError naming the bad value."""
    if not isinstance(gold, str) or len(gold.strip()) != 1 or gold.strip().upper() not in letters:
        raise ValueError(f"the gold option (task.answer) must be one letter of {list(letters)}, "
                         f"got {gold!r}")
    return gold.strip().upper()


def grade_choice(response: str | None, gold: str, letters: str = "ABCD") -> bool:
    """Whether ``response`` chooses exactly the gold letter."""
    return extract_choice(response, letters) == gold_letter(gold, letters)


class ChoiceReward(Reward):
    """1.0 when the answer chooses the task's gold letter (``task.answer``), else 0.0.

    The answer is the protocol's (AutoTIR's: ``extract_choice`` of the final response); it is
    read again as a choice here (``extract_choice`` of a single letter is that letter), so an
    answer that names several letters chooses nothing.  Components: ``correct`` and
    ``has_answer`` (a single letter was chosen).
    """

    def __init__(self, letters: str = "ABCD"):
        self.letters = letters

    def score(self, task: "Task", trajectory: "Trajectory | None",
              answer: str | None) -> RewardResult:
        gold = gold_letter(task.answer, self.letters)
        chosen = extract_choice(answer, self.letters)
        correct = chosen == gold
        return RewardResult(float(correct), {"correct": float(correct),
                                             "has_answer": float(chosen is not None)},
                            correct=correct, answered=chosen is not None)
