"""The reward contract: a value and its named components, computed from the policy's text.

A reward sees the task, the ledger and the policy's own action texts (one per turn).  It never
reads tool output or the prompt to find an answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, Sequence

if TYPE_CHECKING:
    from tir_envs.data.task import Task
    from tir_envs.trajectory import Trajectory


@dataclass
class RewardResult:
    value: float
    components: dict[str, float] = field(default_factory=dict)


class Reward(Protocol):
    def __call__(self, task: "Task", trajectory: "Trajectory",
                 actions: Sequence[str]) -> RewardResult: ...
