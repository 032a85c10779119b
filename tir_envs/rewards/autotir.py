"""AutoTIR's reward (Wei et al. 2025): ``r = w_act * r_act + w_out * r_out``.

``r_out`` by the task's domain (``task.meta["domain"]``), from the answer the policy wrote in its
final action (``final_answer``, the AutoTIR protocol's one reading: the boxed answer of its
``<answer>`` block, the chosen option letter, the response of a writing task; never tool
output):
  * ``knowledge``: token F1 of the answer against the gold aliases;
  * ``math``: 1 if the boxed answer is equivalent to the gold (the project's Math-Verify grader);
  * ``instruction``: IFScore, 1 when every instruction of the prompt is followed (strict), on
    the whole visible response (``visible_response``), never only on a box inside it;
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
``output_reward`` says how ``r_out`` enters the total:
  * ``"paper"`` (default, the paper's eq. 5): ``max(0.1, f_eva)`` when the final response is
    correctly formatted (it holds a ``\\boxed{}`` answer: in its last ``<answer>`` block when it
    has one), else 0: a boxed wrong answer still earns the 0.1 floor, an unboxed right one
    earns nothing.  ``final_answer`` marks the answer it reads with ``formatted``; an answer
    given to ``score`` without the mark counts as formatted only if it is a boxed
    ``FinalAnswer``;
  * ``"plain"``: ``f_eva`` as scored, whatever the format (this library's reading before
    issue 33).
Tool Selection per trajectory is recorded in ``trajectory.metadata["tool_selection"]`` (the
result's ``metadata``: the env writes it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from tir_envs.answers.autotir import is_formatted
from tir_envs.rewards.base import Reward, RewardResult
from tir_envs.rewards.choice import ChoiceReward
from tir_envs.rewards.ifeval import IFEvalReward
from tir_envs.rewards.math.pool import GraderPool
from tir_envs.rewards.math.reward import MathReward
from tir_envs.rewards.qa import exact_match, f1, gold_list

if TYPE_CHECKING:
    from tir_envs.task import Task
    from tir_envs.trajectory import Trajectory

DOMAINS = ("knowledge", "math", "instruction", "multiple_choice")
_TEXT = re.compile(r"\\(?:text|textbf|mathrm)\{([^{}]*)\}")
OUTPUT_REWARDS = ("paper", "plain")
#: eq. 5's floor: a correctly formatted output earns at least this much
FORMAT_FLOOR = 0.1


def formatted_output_reward(f_eva: float, formatted: bool, floor: float = FORMAT_FLOOR) -> float:
    """AutoTIR's eq. 5: ``max(floor, f_eva)`` for a formatted output, else 0."""
    return max(floor, f_eva) if formatted else 0.0


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
class AutoTIRReward(Reward):
    """AutoTIR's reward (module docstring).  ``grader``: a ``GraderPool`` for math."""

    w_act: float = 0.1
    w_out: float = 0.9
    wrong_tool: float = -1.0
    no_tool: float = 0.0
    grader: GraderPool | None = None
    tools: tuple[str, ...] = ("search", "python")
    output_reward: str = "paper"

    def __post_init__(self) -> None:
        if self.output_reward not in OUTPUT_REWARDS:
            raise ValueError(f"output_reward must be one of {OUTPUT_REWARDS} ('paper': eq. 5, "
                             f"max(0.1, f) when boxed else 0), got {self.output_reward!r}")
        self._math = MathReward(correct_reward=1.0, wrong_reward=0.0, grader=self.grader)
        self._ifeval = IFEvalReward("strict")
        self._choice = ChoiceReward()

    def r_act(self, counts: dict[str, int], ground_truth: str | None) -> float:
        if ground_truth is None:
            return 1.0
        if any(n for tool, n in counts.items() if tool != ground_truth):
            return self.wrong_tool
        return 1.0 if counts.get(ground_truth) else self.no_tool

    def f_eva(self, task: "Task", trajectory: "Trajectory | None",
              answer: str | None) -> RewardResult:
        """``f_eva`` of ``answer`` (the score eq. 5 gates into ``r_out``) and its typed outcome,
        by domain."""
        domain = task.meta.get("domain")
        if domain == "instruction":
            return self._ifeval.score(task, trajectory, answer)
        if domain == "multiple_choice":
            return self._choice.score(task, trajectory, answer)
        if domain == "math":
            if answer is None:
                return RewardResult(0.0, {"correct": 0.0, "has_answer": 0.0}, correct=False,
                                    answered=False)
            result = self._math.score(task, trajectory, answer)
            correct = bool(result.components["correct"])
            return RewardResult(float(correct), result.components, correct=correct,
                                answered=True)
        if domain == "knowledge":
            text = None if answer is None else _TEXT.sub(r"\1", answer).strip()
            golds = gold_list(task.answer)
            em, score = exact_match(text, golds, task.question), f1(text, golds, task.question)
            return RewardResult(score, {"em": em, "f1": score}, correct=bool(em),
                                answered=text is not None)
        raise ValueError(f"task {task.id!r} has domain {domain!r}; AutoTIR tasks need "
                         f"meta['domain'] in {DOMAINS}")

    def score(self, task: "Task", trajectory: "Trajectory", answer: str | None) -> RewardResult:
        out = self.f_eva(task, trajectory, answer)
        ground_truth = task.meta.get("tool")
        counts = invocations(trajectory, self.tools)
        act = self.r_act(counts, ground_truth)
        r_out, extra = out.value, {}
        if self.output_reward == "paper":
            formatted = is_formatted(answer)
            r_out = formatted_output_reward(out.value, formatted)
            extra = {"f_eva": out.value, "formatted": float(formatted)}
        components = {**out.components, "r_act": act, "r_out": r_out, **extra,
                      **{f"calls_{tool}": float(n) for tool, n in counts.items()}}
        value = self.w_act * act + self.w_out * r_out
        return RewardResult(value, components, correct=out.correct, answered=out.answered,
                            metadata={"tool_selection": tool_selection(counts, ground_truth)})
