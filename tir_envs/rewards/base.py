"""The reward contract: a value and its named components, from the protocol's one answer.

A reward is a part of the env (``TIREnv(..., reward=...)``).  When an episode ends, the env
asks its protocol for the policy's final answer, once, and hands that same answer to the
reward's ``score(task, trajectory, answer)``; the ledger records it too, so what a trainer or a
viewer sees as the answer is what was graded.  A reward never reads tool output or the prompt
to find an answer, and it never writes to the ledger: what it wants recorded (metadata, a
grader's own failure) travels in its ``RewardResult`` and the env writes it.

Offline (grading saved action texts), the answer is read by the same protocol an env would
use: ``protocol.grade(reward, task, actions)``; a reward has no reading of its own.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from tir_envs.sync_bridge import in_loop

if TYPE_CHECKING:
    from tir_envs.task import Task
    from tir_envs.trajectory import Trajectory


@dataclass
class RewardResult:
    """A reward's verdict on one episode.

    ``value`` is what the trainer optimises; ``components`` are the named terms, logged as they
    are.  ``correct`` / ``answered`` are the typed outcome the env copies onto the trajectory,
    so trainers and metrics never guess from component names (``None``: the reward cannot say,
    e.g. a task without a gold answer); the answer beside them is the protocol's reading,
    never the reward's to rewrite.  ``metadata`` is what the env adds
    to ``trajectory.metadata``; ``infra_failed``: the grader itself failed for reasons that are
    not the policy's (a broken gold query), so the env flags the trajectory for a trainer to
    drop rather than score.
    """

    value: float
    components: dict[str, float] = field(default_factory=dict)
    correct: bool | None = None
    answered: bool | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    infra_failed: bool = False


class Reward:
    """Base class of the shipped rewards: ``score`` grades the protocol's answer.

    ``answer`` is what the env's protocol extracted from the policy's own text (``None`` when
    it found none), ``trajectory`` the ledger (for terms about tool use or budgets), ``task``
    holds the gold.  A plain function ``f(task, trajectory, answer) -> RewardResult`` is a
    reward too (``as_reward``).
    """

    def score(self, task: "Task", trajectory: "Trajectory | None", answer: Any) -> RewardResult:
        raise NotImplementedError(f"{type(self).__name__} must define "
                                  "score(task, trajectory, answer) -> RewardResult")

    async def ascore(self, task: "Task", trajectory: "Trajectory | None",
                     answer: Any) -> RewardResult:
        """``score`` as the env awaits it when an episode ends: on a worker thread under an
        event loop (slow grading never stalls the other episodes), inline when driven loop-less
        (``sync_bridge``: no other episode waits on this thread).  A reward that awaits I/O (a
        judge model) overrides this, starting with ``await needs_loop()``."""
        if not in_loop():
            return self.score(task, trajectory, answer)
        return await asyncio.to_thread(self.score, task, trajectory, answer)


class FunctionReward(Reward):
    """A plain function ``f(task, trajectory, answer) -> RewardResult`` as a ``Reward``."""

    def __init__(self, function: Callable[..., RewardResult]):
        self.function = function

    def __getattr__(self, name: str) -> Any:
        """The function's own attributes (a declared ``rel_tol``, say) read through."""
        if name == "function":  # not set yet (copying, unpickling)
            raise AttributeError(name)
        return getattr(self.function, name)

    def score(self, task, trajectory, answer) -> RewardResult:
        result = self.function(task, trajectory, answer)
        if not isinstance(result, RewardResult):
            raise TypeError(f"the reward {self.function!r} returned {type(result).__name__}; a "
                            "reward returns a RewardResult(value, components, correct=..., "
                            "answered=...)")
        return result


class NoReward(Reward):
    """The reward of an env given none: 0, and no verdict."""

    def score(self, task, trajectory, answer) -> RewardResult:
        return RewardResult(0.0)


def as_reward(reward: "Reward | Callable[..., RewardResult] | None") -> Reward:
    """A ``Reward`` from what an env was given: a ``Reward``, a function
    ``f(task, trajectory, answer)``, or ``None`` (no reward)."""
    if reward is None:
        return NoReward()
    if isinstance(reward, Reward):
        return reward
    if callable(reward):
        return FunctionReward(reward)
    raise TypeError(f"reward must be a tir_envs.rewards.Reward or a function "
                    f"f(task, trajectory, answer) -> RewardResult, got {type(reward).__name__}")
