"""A policy that replays given actions: for tests, demos, and simulated load.

It behaves like a real generator at the boundary that matters to the env: actions are cut at
the first stop string (kept), capped at ``max_tokens``, and returned as token ids of the env's
tokenizer.  ``token_delay_s`` makes each token cost time, as a server under continuous batching
would, so the engine can be measured against a known policy speed.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Sequence, Union

from tir_envs.rollout.policy import Generation, SamplingParams
from tir_envs.rollout.stops import cut_at_stop, first_stop
from tir_envs.tokenizer import load_tokenizer
from tir_envs.codec import Codec

Script = Union[Sequence[str], Callable[[str], str]]


class ScriptedPolicy:
    """Replays ``script``.

    ``script`` is either a list of action texts, one per turn (the turn is found by locating the
    earlier actions, in order, in the context; past the end the policy returns an empty action,
    which ends the episode), or a function from the context text (prompt and episode so far) to
    the next action text.  ``logprob``: the log-probability reported for every token (``None``:
    no logprobs, as a text-only source would give).
    """

    def __init__(self, script: Script, tokenizer: Any = None, token_delay_s: float = 0.0,
                 logprob: float | None = None):
        if isinstance(script, str) or not (callable(script) or isinstance(script, Sequence)):
            raise TypeError("script must be a list of action strings or a function "
                            f"context_text -> action_text; got {type(script).__name__}")
        if not callable(script) and not all(isinstance(a, str) for a in script):
            raise TypeError("every scripted action must be a str")
        if token_delay_s < 0:
            raise ValueError(f"token_delay_s must be >= 0, got {token_delay_s}")
        self.script = script
        self.tokenizer = load_tokenizer(tokenizer)
        self.codec = Codec(self.tokenizer)
        self.token_delay_s = token_delay_s
        self.logprob = logprob
        self.calls = 0

    def next_action(self, context: str, stop: Sequence[str] = ()) -> str:
        """The action text for this context (before stop strings and caps are applied)."""
        if callable(self.script):
            return self.script(context)
        pos = 0
        for action in self.script:
            said = _upto_stop(action, stop)  # what the context holds if this turn happened
            i = context.find(said, pos) if said else -1
            if i < 0:
                return action
            pos = i + len(said)
        return ""

    async def generate(self, prompt_ids: Sequence[int], stop: Sequence[str],
                       sampling: SamplingParams) -> Generation:
        self.calls += 1
        text = self.next_action(self.codec.decode(prompt_ids), stop)
        ids = self.codec.encode(text)
        cut = cut_at_stop(ids, self.codec.decode, stop, sampling.stop_token_ids,
                          max_tokens=sampling.max_tokens)
        ids = ids[:cut.length]
        if self.token_delay_s:
            await asyncio.sleep(self.token_delay_s * len(ids))
        logprobs = None if self.logprob is None else [float(self.logprob)] * len(ids)
        return Generation(ids, logprobs, cut.finish_reason, cut.stop_reason,
                          text=self.codec.decode(ids))


def in_turns(actions: Sequence[str]) -> Callable[[str], str]:
    """A script that gives ``actions`` one per call, whatever the context holds (then ``""``):
    for a policy that knows its episode's actions, which a list script would look for in the
    context and skip if the prompt happens to quote one (Search-R1's example answer is the
    gold of "Capital of France?").  One episode per script."""
    queue = list(actions)

    def next_turn(context: str) -> str:
        return queue.pop(0) if queue else ""
    return next_turn


def _upto_stop(text: str, stop: Sequence[str]) -> str:
    hit = first_stop(text, stop)
    return text if hit is None else text[:hit[0]]
