"""Sanity policies that know each task's gold: ``oracle`` and ``wrong`` for ``tir-envs rollout``.

``GoldPolicy("oracle")`` writes each task's gold answer the way the env's own protocol writes
an answer (``protocol.render_answer``), in one action and with no tool call; ``"wrong"`` writes
a fixed wrong answer the same way.  They check an env and its tasks end to end: the oracle must
be graded correct on every task with a gold (a miss is a data, extraction or grader bug), the
wrong answer never.  The engine asks ``for_task`` for the policy of each episode (``acollect``),
since a policy on its own never sees the task.  (The benchmark suites have their own, suite-aware
versions: ``tir_envs.bench.oracle``.)
"""

from __future__ import annotations

from typing import Any, Sequence

from tir_envs.rollout.policy import Generation, SamplingParams
from tir_envs.rollout.scripted import ScriptedPolicy, in_turns

#: a string no gold answer, SQL result or option letter contains
WRONG_ANSWER = "xyzzyplugh"
KINDS = ("oracle", "wrong")


class GoldPolicy:
    """``kind="oracle"``: every task's gold; ``"wrong"``: a fixed wrong answer (module doc)."""

    def __init__(self, kind: str, tokenizer: Any = None):
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        self.kind = kind
        self._replay = ScriptedPolicy([], tokenizer)
        self.tokenizer = self._replay.tokenizer  # the vocabulary check reads it

    def text_for(self, task: Any) -> str:
        """The answer written for ``task`` (before the protocol wraps it)."""
        if self.kind == "wrong":
            return WRONG_ANSWER
        gold = task.answer
        if isinstance(gold, (list, tuple)):
            gold = gold[0] if gold else None
        if gold is None:
            raise ValueError(f"task {task.id!r} has no gold answer: --policy oracle needs tasks "
                             "with an 'answer'")
        return str(gold).strip()

    def for_task(self, task: Any, env: Any) -> ScriptedPolicy:
        """The policy of one episode of ``task`` on ``env`` (an unwrapped ``TIREnv``)."""
        return ScriptedPolicy(in_turns([env.protocol.render_answer(self.text_for(task))]),
                              self.tokenizer)

    async def generate(self, prompt_ids: Sequence[int], stop: Sequence[str],
                       sampling: SamplingParams) -> Generation:
        raise TypeError("a GoldPolicy answers per task: run it through collect/acollect, which "
                        "ask for_task(task, env) for each episode's policy")
