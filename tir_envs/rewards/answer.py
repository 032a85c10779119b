"""Rewards of one extracted answer against a task's gold: ``answer_reward(kind)``.

``tir/ToolUse-v0`` takes ``reward="em"`` (exact match, SQuAD normalisation), ``"f1"`` (token
F1), ``"math"`` (symbolic equivalence through the grader pool) or a function of the answer and
the task (``fn(answer, task)`` or ``fn(answer, task, trajectory)``) returning a number, a bool
or a ``RewardResult``.  The answer is the protocol's one extraction from the policy's own final
action: a reward never reads tool output or the prompt.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable

from tir_envs.rewards.base import RewardResult

if TYPE_CHECKING:
    from tir_envs.task import Task
    from tir_envs.trajectory import Trajectory

KINDS = ("em", "f1", "math")
AnswerReward = Callable[["str | None", "Task", "Trajectory"], RewardResult]


def answer_reward(kind: str | Callable[..., Any]) -> AnswerReward:
    """The reward ``(answer, task, trajectory) -> RewardResult`` named by ``kind``."""
    if callable(kind):
        return _custom(kind)
    if kind in ("em", "f1"):
        return _qa(kind)
    if kind == "math":
        return _math()
    raise ValueError(f"reward must be one of {', '.join(KINDS)} or a function "
                     f"fn(answer, task) -> float; got {kind!r}")


def _qa(metric: str) -> AnswerReward:
    from tir_envs.rewards.qa import exact_match, f1

    def reward(answer, task, trajectory) -> RewardResult:
        em = exact_match(answer, task.answer)
        score = {"em": em, "f1": f1(answer, task.answer) if metric == "f1" else em}
        value = score[metric]
        return RewardResult(value, {"em": em, metric: value}, correct=em == 1.0,
                            answered=answer is not None, answer=answer)
    return reward


def _math() -> AnswerReward:
    from tir_envs.rewards.math.extract import extract_final_answer
    from tir_envs.rewards.math.reward import MathReward
    grader = MathReward(known_tools=None)

    def reward(answer, task, trajectory) -> RewardResult:
        if answer is not None:  # "\\boxed{x}" inside the answer tag is x
            answer = extract_final_answer(answer) or answer
        result = grader(task, trajectory, [], answer=answer) if answer is not None else \
            RewardResult(grader.wrong_reward, {"correct": 0.0})
        result.correct = bool(result.components.get("correct"))
        result.answered, result.answer = answer is not None, answer
        return result
    return reward


def _custom(fn: Callable[..., Any]) -> AnswerReward:
    try:
        wants_trajectory = len(inspect.signature(fn).parameters) >= 3
    except (TypeError, ValueError):
        wants_trajectory = False

    def reward(answer, task, trajectory) -> RewardResult:
        value = fn(answer, task, trajectory) if wants_trajectory else fn(answer, task)
        if isinstance(value, RewardResult):
            if value.answered is None:
                value.answered = answer is not None
            value.answer = value.answer if value.answer is not None else answer
            return value
        if isinstance(value, bool) or isinstance(value, (int, float)):
            return RewardResult(float(value), {"reward": float(value)},
                                correct=bool(value) if isinstance(value, bool) else None,
                                answered=answer is not None, answer=answer)
        raise TypeError(f"the reward function {getattr(fn, '__name__', fn)!r} returned "
                        f"{type(value).__name__}; return a number, a bool or a RewardResult")
    return reward
