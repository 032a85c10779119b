"""IFEval as an episode reward: IFScore of the policy's final response.

The instructions come from the task (``meta["instruction_id_list"]`` and ``meta["kwargs"]``,
as the IFEval loader and the training-prompt generator write them); the response is the
policy's own final action with its reasoning removed, never tool output or the prompt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tir_envs.rewards.base import Reward, RewardResult
from tir_envs.rewards.ifeval.evaluate import IFEvalVerdict, score_response

if TYPE_CHECKING:
    from tir_envs.task import Task
    from tir_envs.trajectory import Trajectory

MODES = ("strict", "loose", "soft")


def task_instructions(task: "Task") -> tuple[list[str], list[dict]]:
    """The task's instruction ids and kwargs, with an error naming the task when absent."""
    ids, kwargs = task.meta.get("instruction_id_list"), task.meta.get("kwargs")
    if not ids:
        raise ValueError(f"task {task.id!r} has no meta['instruction_id_list']; IFEval rewards "
                         "need tasks from load_ifeval() or generate_instruction_tasks()")
    return list(ids), list(kwargs) if kwargs is not None else [{} for _ in ids]


class IFEvalReward(Reward):
    """Instruction-following reward.

    ``value`` is, by ``mode``: ``strict`` (default; AutoTIR's IFScore: 1 when every instruction
    is followed as written, else 0), ``loose`` (IFEval's loose prompt-level verdict) or
    ``soft`` (share of instructions followed, strict).  All of them are logged as components,
    with ``correct`` = the strict prompt-level verdict and ``has_answer`` = a non-blank response.
    The response is the protocol's answer (AutoTIR's: the whole visible final response).
    """

    def __init__(self, mode: str = "strict"):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.mode = mode

    def verdict(self, task: "Task", response: str) -> IFEvalVerdict:
        ids, kwargs = task_instructions(task)
        return score_response(response, ids, kwargs)

    def score(self, task: "Task", trajectory: "Trajectory | None",
              answer: str | None) -> RewardResult:
        """IFScore of the response ``answer`` (``None``: an empty response)."""
        response = answer or ""
        verdict = self.verdict(task, response)
        components = {"ifscore": verdict.ifscore, "strict": verdict.ifscore,
                      "loose": float(verdict.loose_prompt), "soft": verdict.soft,
                      "soft_loose": verdict.soft_loose, "correct": verdict.ifscore,
                      "has_answer": float(bool(response))}
        return RewardResult(components[self.mode], components, correct=verdict.strict_prompt,
                            answered=bool(response))
