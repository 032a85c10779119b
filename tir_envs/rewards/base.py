"""The reward contract: a value and its named components, computed from the policy's text.

A reward sees the task, the ledger and the policy's own action texts (one per turn).  It never
reads tool output or the prompt to find an answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tir_envs.task import Task
    from tir_envs.trajectory import Trajectory


@dataclass
class RewardResult:
    """A reward's verdict on one episode.

    ``value`` is what the trainer optimises; ``components`` are the named terms, logged as they
    are.  ``correct`` / ``answered`` / ``answer`` are the typed outcome the env copies onto the
    trajectory, so trainers and metrics never guess from component names (``None``: the
    reward cannot say, e.g. a task without a gold answer).
    """

    value: float
    components: dict[str, float] = field(default_factory=dict)
    correct: bool | None = None
    answered: bool | None = None
    answer: str | None = None
