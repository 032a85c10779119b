"""Scripted policies that know the item: the oracle and two adversaries.

* ``oracle()``: writes each item's gold answer in the suite's own protocol, in one action
  and without calling a tool (IFEval has no gold: it writes a response composed to follow
  every instruction, ``benchmarks.ifeval_oracle``).  It must score 100% on every item: that proves every gold is
  gradable in its own format (a failure is a grader, data or extraction bug).
* ``adversary("wrong")``: answers a fixed wrong string, properly formatted: scores 0.
* ``adversary("unclosed")``: writes the gold answer but never closes its answer tag
  (box, ``<answer>``, ``<solution>``, tool call): scores 0 and counts as "no answer".

They implement ``generate_job`` (see ``benchmarks.jobs``), replaying the item's action with
``ScriptedPolicy`` (cut at stop strings, encoded with the env's tokenizer).
"""

from __future__ import annotations

import copy
import json
from typing import Any, Callable, Sequence

from tir_envs.rollout.policy import Generation, SamplingParams
from tir_envs.rollout.scripted import ScriptedPolicy
from tir_envs.task import Task

from benchmarks.suites import Suite, get_suite

WRONG = "xyzzyplugh"  # one token no gold answer, SQL result or option contains


def _math_final(name: str) -> Callable[[str, bool], str]:
    """How a math protocol's final action carries ``answer`` (``closed=False``: left open)."""
    def box(answer: str, closed: bool) -> str:
        return f"\\boxed{{{answer}}}" if closed else f"\\boxed{{{answer}"

    if name == "torl":
        return lambda a, closed: f"I know this one.\nThe final answer is {box(a, closed)}."
    if name == "zerotir":
        return lambda a, closed: (f" I know this one. </think> <answer> {box(a, closed)} "
                                  f"</answer>" if closed else
                                  f" I know this one. </think> <answer> {box(a, False)}")
    if name == "rite":
        def rite(a: str, closed: bool) -> str:
            call = json.dumps({"name": "answer", "arguments": {"answer": box(a, closed)}},
                              ensure_ascii=False)
            if not closed:  # cut after the open box: no closing quote, brace or tag
                call = call[:call.rindex('"')]
            tail = "\n</tool_call>" if closed else ""
            return f"<think>I know this one.</think>\n<tool_call>\n{call}{tail}"
        return rite
    raise ValueError(f"no oracle format for math protocol {name!r}")


def _tagged(open_tag: str, close_tag: str, prefix: str = "") -> Callable[[str, bool], str]:
    return lambda a, closed: f"{prefix}{open_tag}{a}{close_tag if closed else ''}"


def final_format(suite: Suite, protocol: str | None = None) -> Callable[[str, bool], str]:
    """``(answer, closed) -> action text`` in ``suite``'s protocol."""
    if suite.env_id == "tir/MathCode-v0":
        return _math_final(protocol or suite.env_kwargs.get("protocol", "torl"))
    if suite.env_id == "tir/Search-v0":
        return _tagged("<answer>", "</answer>", "<think>I know this one.</think>\n")
    if suite.env_id == "tir/AutoTIR-v0":
        return lambda a, closed: ("<think>I know this one.</think>\n<answer> The final answer is "
                                  + (f"\\boxed{{{a}}} </answer>" if closed else f"\\boxed{{{a}"))
    if suite.env_id == "tir/SQL-v0":
        return _tagged("<solution>", "</solution>", "<think>I know this one.</think>\n")
    if suite.env_id == "tir/ToolUse-v0":
        return _tagged("<answer>", "</answer>", "I know this one.\n")
    raise ValueError(f"no oracle format for suite {suite.name!r} ({suite.env_id})")


def gold_of(task: Task, scoring: str) -> str:
    """The gold answer as the text the policy would write."""
    if scoring == "ifeval":  # no gold: a response composed to follow every instruction
        from benchmarks.ifeval_oracle import ifeval_response
        return ifeval_response(task, best_effort=True)
    answer = task.answer
    if scoring == "qa":
        return answer if isinstance(answer, str) else str(answer[0])
    if answer is None:
        raise ValueError(f"task {task.id!r} has no gold answer for the oracle")
    return str(answer).strip()


def wrong_of(scoring: str) -> str:
    return f"SELECT '{WRONG}'" if scoring == "sql" else WRONG


class ItemScriptedPolicy:
    """Replays, for each job, the actions ``script(job)`` gives (see the module docstring)."""

    def __init__(self, script: Callable[[Any], Sequence[str]], tokenizer: Any = None):
        self.script = script
        self._replay = ScriptedPolicy([], tokenizer)

    async def generate_job(self, job, prompt_ids: Sequence[int], stop: Sequence[str],
                           sampling: SamplingParams) -> Generation:
        replay = copy.copy(self._replay)  # shares the tokenizer; its own script
        replay.script = list(self.script(job))
        return await replay.generate(prompt_ids, stop, sampling)

    async def generate(self, prompt_ids, stop, sampling) -> Generation:
        raise TypeError("an item-scripted policy runs under the benchmark harness "
                        "(benchmarks.run), which tells it the item")


def _format_of(job, protocol: str | None) -> Callable[[str, bool], str]:
    return final_format(get_suite(job.suite), protocol)


def oracle(protocol: str | None = None, tokenizer: Any = None) -> ItemScriptedPolicy:
    """The gold answer of every item, in its suite's protocol, in one action.

    ``protocol``: the math protocol when the run overrides the suite's default."""
    def script(job) -> list[str]:
        gold = gold_of(job.task, job.part.scoring)
        if job.part.scoring == "ifeval":
            return [gold]  # the response itself is what IFEval scores
        return [_format_of(job, protocol)(gold, True)]
    return ItemScriptedPolicy(script, tokenizer)


def adversary(kind: str, protocol: str | None = None,
              tokenizer: Any = None) -> ItemScriptedPolicy:
    """``kind="wrong"``: a fixed wrong answer; ``"unclosed"``: the gold, tag never closed."""
    if kind == "wrong":
        return ItemScriptedPolicy(
            lambda job: [_format_of(job, protocol)(wrong_of(job.part.scoring), True)], tokenizer)
    if kind == "unclosed":
        return ItemScriptedPolicy(
            lambda job: [_format_of(job, protocol)(gold_of(job.task, job.part.scoring), False)],
            tokenizer)
    raise ValueError(f"kind must be 'wrong' or 'unclosed', got {kind!r}")
