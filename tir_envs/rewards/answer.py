"""The rewards ``tir/ToolUse-v0`` names: ``answer_reward(kind)``.

``"em"`` (exact match, SQuAD normalisation) and ``"f1"`` (token F1) are ``QAReward``;
``"math"`` is ``MathReward`` (symbolic equivalence through the grader pool) on the answer with
a ``\\boxed{}`` around it removed; a ``Reward`` is used as it is; a function
``f(task, trajectory, answer)`` (the order every reward part is called with) may return a
number or a bool as well as a ``RewardResult``.  The answer is the protocol's one reading of
the policy's own final action: a reward never reads tool output or the prompt.
"""

from __future__ import annotations

from typing import Any, Callable

from tir_envs.rewards.base import Reward, RewardResult

KINDS = ("em", "f1", "math")


def answer_reward(kind: "str | Reward | Callable[..., Any]") -> Reward:
    """The ``Reward`` named by ``kind`` (see the module docstring)."""
    if isinstance(kind, Reward):
        return kind
    if callable(kind):
        return ScoreFunction(kind)
    if kind in ("em", "f1"):
        return GoldRequired(_qa(kind))
    if kind == "math":
        return BoxedMath()
    raise ValueError(f"reward must be one of {', '.join(KINDS)}, a Reward, or a function "
                     f"f(task, trajectory, answer) -> float; got {kind!r}")


def _qa(metric: str) -> Reward:
    from tir_envs.rewards.qa import QAReward
    return QAReward(metric)


class GoldRequired(Reward):
    """``inner`` on tasks with a gold answer; 0 with no verdict on tasks without one."""

    def __init__(self, inner: Reward):
        self.inner = inner

    def score(self, task, trajectory, answer) -> RewardResult:
        if task.answer is None:
            return RewardResult(0.0, {"has_gold": 0.0}, answered=answer is not None)
        return self.inner.score(task, trajectory, answer)


class BoxedMath(Reward):
    """``MathReward`` of the answer, a ``\\boxed{}`` around it removed."""

    def __init__(self) -> None:
        from tir_envs.rewards.math.reward import MathReward
        self.inner = MathReward(known_tools=None)

    def score(self, task, trajectory, answer) -> RewardResult:
        if answer is not None:
            from tir_envs.answers.math import extract_final_answer
            answer = extract_final_answer(answer) or answer
        return self.inner.score(task, trajectory, answer)


class ScoreFunction(Reward):
    """A function ``f(task, trajectory, answer)`` returning a number, a bool or a
    ``RewardResult``."""

    def __init__(self, function: Callable[..., Any]):
        self.function = function

    def score(self, task, trajectory, answer) -> RewardResult:
        value = self.function(task, trajectory, answer)
        if isinstance(value, RewardResult):
            if value.answered is None:
                value.answered = answer is not None
            return value
        if isinstance(value, (bool, int, float)):
            return RewardResult(float(value), {"reward": float(value)},
                                correct=value if isinstance(value, bool) else None,
                                answered=answer is not None)
        raise TypeError(f"the reward function {getattr(self.function, '__name__', '?')!r} "
                        f"returned {type(value).__name__}; return a number, a bool or a "
                        "RewardResult")
