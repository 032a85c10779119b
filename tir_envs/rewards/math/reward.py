"""The outcome reward of a math episode, with every term logged as a component.

Terms (each optional except the first):
  * ``outcome``: ``correct_reward`` (1) for an equivalent answer, ``wrong_reward`` otherwise
    (0; ToRL uses -1).  The answer is what the policy itself wrote, never tool output.
  * ``exec_error_penalty``: ToRL's code-execution penalty (0.5 in the paper), subtracted once
    when any executed code failed (error, timeout, or killed for a resource limit).
  * ``tool_penalty``: VerlTool's R_tool of its math setting (paper eq. 6): 0 when the answer is
    correct, this value (-0.25 there) otherwise; so a wrong answer scores -1.25 with R_acc = ±1.
  * ``tool_penalties``: the -0.25 shaping terms of VerlTool's reward code, by name:
    ``exec_error`` (some execution failed), ``no_tool`` (the episode never ran a tool),
    ``invalid_action`` (a tool call could not be understood or named an unknown tool),
    ``unfinished`` (cut by a budget, not finished).
Infrastructure failures (sandbox died) are not penalised as code errors; the trajectory's
``infra_failed`` flag tells a trainer to drop the episode instead.

The answer is the protocol's (``MathProtocol.answer``: the boxed final answer outside code, or
with ``extraction="fallback"`` also an unboxed one), handed to ``score`` and recorded as
``trajectory.metadata["answer"]``; offline, ``protocol.grade(reward, task, actions)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from tir_envs.rewards.base import Reward, RewardResult
from tir_envs.status import Status
from tir_envs.rewards.math.forms import form_correct, strip_unit
from tir_envs.rewards.math.pool import QUICK, TIMEOUT, Grade, GraderPool, default_pool

TOOL_PENALTIES = ("exec_error", "no_tool", "invalid_action", "unfinished")
_FAILED = frozenset({Status.ERROR, Status.TIMEOUT, Status.KILLED})


def gold_text(answer: Any) -> str:
    """A task's gold answer as the grader's string (ints from AIME 2025, strings elsewhere; a
    list or set of values becomes ``"a, b"``, graded as a set)."""
    if answer is None:
        raise ValueError("the task has no gold 'answer'; math rewards need one")
    if isinstance(answer, (list, set, frozenset)):
        return ", ".join(gold_text(a) for a in answer)
    return str(answer).strip()


def execution_failures(trajectory) -> int:
    """Executed tool calls that failed because of the code (not budgets, parsing, or infra)."""
    n = 0
    for turn in trajectory.turns:
        for r in turn.tool_results:
            failed = Status(r.get("status", "ok")) in _FAILED
            if failed and not r.get("exhausted") and not r.get("parse_error"):
                n += 1
    return n


def invalid_calls(trajectory, known_tools: Sequence[str] | None = None) -> int:
    """Tool calls that were not understood (bad JSON, no name) or named an unknown tool."""
    n = 0
    for turn in trajectory.turns:
        for call in turn.tool_calls:
            unknown = known_tools is not None and call.get("name") not in known_tools
            if call.get("error") or unknown:
                n += 1
    return n


@dataclass
class MathReward(Reward):
    """Outcome reward of the math-code recipes (see the module docstring for the terms)."""

    correct_reward: float = 1.0
    wrong_reward: float = 0.0
    exec_error_penalty: float = 0.0
    tool_penalties: Mapping[str, float] = field(default_factory=dict)
    tool_penalty: float = 0.0
    grader: GraderPool | None = None
    known_tools: Sequence[str] | None = ("python",)

    def __post_init__(self) -> None:
        if self.tool_penalty > 0:
            raise ValueError(f"tool_penalty is added to a wrong answer's reward, so it must be "
                             f"<= 0 (VerlTool: -0.25); got {self.tool_penalty}")
        unknown = set(self.tool_penalties) - set(TOOL_PENALTIES)
        if unknown:
            raise ValueError(f"unknown tool_penalties {sorted(unknown)}; choose from "
                             f"{list(TOOL_PENALTIES)} (e.g. {{'exec_error': 0.25}})")

    def grade(self, answer: str | None, gold: Any) -> Grade:
        return (self.grader or default_pool()).grade(answer, gold_text(gold))

    def grade_task(self, answer: str | None, task) -> Grade:
        """``grade`` against the task's gold, by the task's ``answer_form`` when it has one and
        without its ``unit`` (``tir_envs.rewards.math.forms``)."""
        meta = getattr(task, "meta", None) or {}
        if answer is not None and meta.get("unit"):
            bare = strip_unit(str(answer), meta["unit"])
            answer = answer if bare == str(answer) else bare  # a unit stripped: one value
        form = meta.get("answer_form")
        if form is None or answer is None:
            return self.grade(answer, task.answer)
        ok = form_correct(str(answer), gold_text(task.answer), form,
                          lambda p, g: self.grade(p, g).correct)
        return Grade(ok, QUICK, detail=f"answer_form {form}")

    def score(self, task, trajectory, answer: str | None) -> RewardResult:
        """Reward of a finished episode whose answer is ``answer`` (``None``: none given).  A
        task without a gold answer (inference only) scores 0 with no verdict."""
        record = {"answer": answer}
        if task.answer is None:
            return RewardResult(0.0, {"has_gold": 0.0, "has_answer": float(answer is not None)},
                                answered=answer is not None, metadata=record)
        grade = self.grade_task(answer, task)
        outcome = self.correct_reward if grade.correct else self.wrong_reward
        parts = {"correct": float(grade.correct), "has_answer": float(answer is not None),
                 "outcome": outcome}
        if grade.status == TIMEOUT:
            parts["grade_timeout"] = 1.0
        total = outcome
        failures = execution_failures(trajectory)
        if self.exec_error_penalty:
            parts["exec_error_penalty"] = -self.exec_error_penalty if failures else 0.0
            total += parts["exec_error_penalty"]
        if self.tool_penalty:
            parts["tool_penalty"] = 0.0 if grade.correct else float(self.tool_penalty)
            total += parts["tool_penalty"]
        for name, value in self.tool_penalties.items():
            hit = self._penalised(name, trajectory, failures)
            parts[f"{name}_penalty"] = -abs(value) if hit else 0.0
            total += parts[f"{name}_penalty"]
        return RewardResult(total, parts, correct=grade.correct, answered=answer is not None,
                            metadata=record)

    def _penalised(self, name: str, trajectory, failures: int) -> bool:
        if name == "exec_error":
            return failures > 0
        if name == "no_tool":
            return trajectory.num_tool_calls == 0
        if name == "invalid_action":
            return invalid_calls(trajectory, self.known_tools) > 0
        return bool(trajectory.truncated and not trajectory.terminated)  # unfinished
