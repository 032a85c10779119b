"""AutoTIR's reward (Wei et al. 2025): ``r = w_act * r_act + w_out * r_out``.

``r_out`` by the task's domain (``task.meta["domain"]``), from the answer the policy wrote in its
final action (``final_answer``: the boxed answer of its ``<answer>`` block; never tool output):
  * ``knowledge``: token F1 of the answer against the gold aliases;
  * ``math``: 1 if the boxed answer is equivalent to the gold (the project's Math-Verify grader);
  * ``instruction``: IFScore, 1 when every instruction of the prompt is followed (strict);
  * ``multiple_choice``: 1 if the one option letter chosen is the gold.
``r_act`` from the tools the policy invoked (calls of a known tool, executed or refused by the
budget; unparseable calls are not invocations) against the task's ground-truth tool
(``task.meta["tool"]``):
  * a wrong tool invoked (search on math, code on knowledge): ``wrong_tool`` (default -1), even
    when the answer is right;
  * otherwise the ground-truth tool invoked: 1;
  * no tool at all on a knowledge or math task: ``no_tool`` (default 0: no credit for tool use,
    no penalty; the paper does not say);
  * a domain where tool use is free (no ground-truth tool): 1.
Tool Selection per trajectory is recorded in ``trajectory.metadata["tool_selection"]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from tir_envs.rewards.base import RewardResult
from tir_envs.rewards.choice import ChoiceReward
from tir_envs.rewards.ifeval import IFEvalReward
from tir_envs.rewards.math.extract import extract_final_answer
from tir_envs.rewards.math.pool import GraderPool
from tir_envs.rewards.math.reward import MathReward
from tir_envs.rewards.qa import exact_match, f1, gold_list
from tir_envs.rewards.response import final_response

if TYPE_CHECKING:
    from tir_envs.task import Task
    from tir_envs.trajectory import Trajectory

DOMAINS = ("knowledge", "math", "instruction", "multiple_choice")
_TEXT = re.compile(r"\\(?:text|textbf|mathrm)\{([^{}]*)\}")
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def final_answer(actions: Sequence[str], domain: str | None) -> str | None:
    """The answer of an AutoTIR episode, from the policy's final action outside ``<think>``:
    the last box of its last ``<answer>`` block, else that block's text, else the last box of
    the response; for a writing task (``instruction``) without either, the response itself."""
    response = final_response(actions)
    # a block holding another <answer> is a nest of answers (a hedge), never one
    blocks = [b for b in _ANSWER.findall(response) if "<answer>" not in b]
    scope = blocks[-1] if blocks else response
    boxed = extract_final_answer(scope)  # a str that also keeps every box of a list answer
    if boxed is not None:
        return boxed
    if blocks:
        return blocks[-1].strip() or None
    return (response or None) if domain == "instruction" else None


def _instruction_response(actions: Sequence[str]) -> str:
    return final_answer(actions, "instruction") or ""


def invocations(trajectory: "Trajectory", tools: Sequence[str]) -> dict[str, int]:
    """Calls the policy made of each known tool (executed, or refused by a spent budget)."""
    counts = {name: 0 for name in tools}
    for turn in trajectory.turns:
        for record in turn.tool_results:
            if record.get("tool") in counts and not record.get("parse_error"):
                counts[record["tool"]] += 1
    return counts


def tool_selection(counts: dict[str, int], ground_truth: str | None) -> dict[str, Any]:
    """TS counts of one trajectory: invocations of the ground-truth tool among all of them
    (``None`` ground truth: TS is undefined there)."""
    total = sum(counts.values())
    right = counts.get(ground_truth, 0) if ground_truth else None
    return {"ground_truth": ground_truth, "right": right, "invocations": total}


@dataclass
class AutoTIRReward:
    """AutoTIR's reward (module docstring).  ``grader``: a ``GraderPool`` for math."""

    w_act: float = 0.1
    w_out: float = 0.9
    wrong_tool: float = -1.0
    no_tool: float = 0.0
    grader: GraderPool | None = None
    tools: tuple[str, ...] = ("search", "python")

    def __post_init__(self) -> None:
        self._math = MathReward(correct_reward=1.0, wrong_reward=0.0, grader=self.grader)
        self._ifeval = IFEvalReward("strict", extract=_instruction_response)
        self._choice = ChoiceReward()

    def r_act(self, counts: dict[str, int], ground_truth: str | None) -> float:
        if ground_truth is None:
            return 1.0
        if any(n for tool, n in counts.items() if tool != ground_truth):
            return self.wrong_tool
        return 1.0 if counts.get(ground_truth) else self.no_tool

    def outcome(self, task: "Task", trajectory: "Trajectory",
                actions: Sequence[str]) -> RewardResult:
        """``r_out`` and its typed outcome, by domain."""
        domain = task.meta.get("domain")
        if domain == "instruction":
            return self._ifeval(task, trajectory, actions)
        if domain == "multiple_choice":
            return self._choice(task, trajectory, actions)
        answer = final_answer(actions, domain)
        if domain == "math":
            if answer is None:  # MathReward would look for a box in every action instead
                return RewardResult(0.0, {"correct": 0.0, "has_answer": 0.0}, correct=False,
                                    answered=False)
            result = self._math(task, trajectory, actions, answer=answer)
            correct = bool(result.components["correct"])
            return RewardResult(float(correct), result.components, correct=correct,
                                answered=answer is not None,
                                answer=None if answer is None else str(answer))
        if domain == "knowledge":
            text = None if answer is None else _TEXT.sub(r"\1", answer).strip()
            golds = gold_list(task.answer)
            em, score = exact_match(text, golds), f1(text, golds)
            return RewardResult(score, {"em": em, "f1": score}, correct=bool(em),
                                answered=text is not None, answer=text)
        raise ValueError(f"task {task.id!r} has domain {domain!r}; AutoTIR tasks need "
                         f"meta['domain'] in {DOMAINS}")

    def __call__(self, task: "Task", trajectory: "Trajectory",
                 actions: Sequence[str]) -> RewardResult:
        out = self.outcome(task, trajectory, actions)
        ground_truth = task.meta.get("tool")
        counts = invocations(trajectory, self.tools)
        act = self.r_act(counts, ground_truth)
        trajectory.metadata["tool_selection"] = tool_selection(counts, ground_truth)
        components = {**out.components, "r_act": act, "r_out": out.value,
                      **{f"calls_{tool}": float(n) for tool, n in counts.items()}}
        value = self.w_act * act + self.w_out * out.value
        return RewardResult(value, components, correct=out.correct, answered=out.answered,
                            answer=out.answer)
