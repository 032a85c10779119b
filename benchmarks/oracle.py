"""Scripted policies that know the item: the oracle and two adversaries.

* ``oracle()``: writes each item's gold answer the way the env's own protocol writes an answer
  (``protocol.render_answer``), in one action and without calling a tool (IFEval has no gold:
  it writes a response composed to follow every instruction, ``tir_envs.bench.ifeval_oracle``).  It
  must score 100% on every item: that proves every gold is gradable in its own format (a
  failure is a grader, data or extraction bug).  Any env whose protocol says how an answer is
  written gets it, a user's own env as well as a shipped one.
* ``adversary("wrong")``: answers a fixed wrong string the same way: scores 0.
* ``adversary("unclosed")``: writes the gold answer but stops right after it, so whatever
  closes the answer (box, ``<answer>``, ``<solution>``, tool call) is never written: scores 0
  and counts as "no answer".

They implement ``generate_job`` (see ``tir_envs.bench.jobs``): the harness hands each job the
protocol of the env that plays it (``Job.protocol``), and its action is replayed with
``ScriptedPolicy`` (cut at stop strings, encoded with the env's tokenizer).
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Sequence

from tir_envs.protocols.base import Protocol
from tir_envs.rollout.policy import Generation, SamplingParams
from tir_envs.rollout.scripted import ScriptedPolicy, in_turns
from tir_envs.task import Task

WRONG = "xyzzyplugh"  # one token no gold answer, SQL result or option contains
#: where ``unclosed`` cuts a rendered answer: plain letters, which no rendering escapes
_CUT = "QQCUTHEREQQ"


class NoAnswerWriter(ValueError):
    """The env's protocol does not say how an answer is written: no oracle can exist."""


def writes_answers(protocol: Protocol) -> bool:
    """Whether ``protocol`` says how an answer is written (``render_answer``)."""
    try:
        protocol.render_answer("1")
    except NotImplementedError:
        return False
    return True


def check_answer_writer(protocol: Protocol, env_id: str, policy: str) -> None:
    """Refuse ``--policy oracle|wrong`` on an env whose protocol cannot write an answer."""
    if not writes_answers(protocol):
        raise NoAnswerWriter(
            f"--policy {policy} writes each answer as the env's protocol does, but {env_id}'s "
            f"protocol {type(protocol).__name__} ({protocol.name!r}) has no "
            "render_answer(text): define it on the protocol (docs/write_an_env.md), or script "
            "the actions yourself with --policy scripted:FILE")


def written(protocol: Protocol | None, text: str, closed: bool = True) -> str:
    """``text`` as the final action of ``protocol`` (``closed=False``: cut right after it)."""
    if protocol is None:
        raise TypeError("an item-scripted policy writes answers in the env's protocol: run it "
                        "under the benchmark harness (tir_envs.bench.run), which tells each job it")
    if closed:
        return protocol.render_answer(text)
    action = protocol.render_answer(text + _CUT)
    if _CUT not in action:
        raise ValueError(f"protocol {protocol.name!r} does not write the answer text as given, "
                         "so it cannot be left open")
    return action[:action.index(_CUT)]


def gold_of(task: Task, scoring: str) -> str:
    """The gold answer as the text the policy would write."""
    if scoring == "ifeval":  # no gold: a response composed to follow every instruction
        from tir_envs.bench.ifeval_oracle import ifeval_response
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
        self._episodes: dict[tuple, ScriptedPolicy] = {}  # each job's replay, turn after turn

    async def generate_job(self, job, prompt_ids: Sequence[int], stop: Sequence[str],
                           sampling: SamplingParams) -> Generation:
        key = (job.suite, job.part.name, job.item, job.sample)
        replay = self._episodes.get(key)
        if replay is None:  # shares the tokenizer; its own actions, one per turn
            replay = self._episodes[key] = copy.copy(self._replay)
            replay.script = in_turns(self.script(job))
        return await replay.generate(prompt_ids, stop, sampling)

    async def generate(self, prompt_ids, stop, sampling) -> Generation:
        raise TypeError("an item-scripted policy runs under the benchmark harness "
                        "(tir_envs.bench.run), which tells it the item")


def oracle(tokenizer: Any = None) -> ItemScriptedPolicy:
    """The gold answer of every item, in its env's protocol, in one action."""
    def script(job) -> list[str]:
        gold = gold_of(job.task, job.part.scoring)
        if job.part.scoring == "ifeval":
            return [gold]  # the response itself is what IFEval scores
        return [written(job.protocol, gold)]
    return ItemScriptedPolicy(script, tokenizer)


def adversary(kind: str, tokenizer: Any = None) -> ItemScriptedPolicy:
    """``kind="wrong"``: a fixed wrong answer; ``"unclosed"``: the gold, never closed."""
    if kind == "wrong":
        return ItemScriptedPolicy(
            lambda job: [written(job.protocol, wrong_of(job.part.scoring))], tokenizer)
    if kind == "unclosed":
        return ItemScriptedPolicy(
            lambda job: [written(job.protocol, gold_of(job.task, job.part.scoring), False)],
            tokenizer)
    raise ValueError(f"kind must be 'wrong' or 'unclosed', got {kind!r}")
