"""One agent episode behind the gateway: render a request, place it in the ledger, generate.

Every call of every wire API ends here as ``Episode.complete(messages, tools, client)``: the
conversation is rendered to ids with the family's serving template (what a server would give
the model), placed in the episode's ledger (appended or forked, ``ledger.py``), the policy
generates **from those ids** with the run's sampling settings (the client's are overridden and
the override recorded), and the completion is parsed back with the family's parser.  Calls on
one episode are serialised: an episode is one conversation, its ledger one order of events.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from tir_envs.gateway.conversation import BadRequest, Message, Parsed, parse_completion
from tir_envs.gateway.ledger import EpisodeLedger, Fork, Segment
from tir_envs.rollout.policy import Generation, SamplingParams
from tir_envs.trajectory import Trajectory

Render = Callable[[list[Message], "list[dict] | None"], list[int]]

#: a request whose text is this long is rendered in a worker thread (the tokenizer releases
#: the GIL while it encodes): a 1 MB conversation takes seconds to encode
OFF_LOOP_CHARS = 64 * 1024

#: client sampling fields the run overrides: wire name -> SamplingParams field
CLIENT_SAMPLING = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k",
                   "max_tokens": "max_tokens", "max_completion_tokens": "max_tokens",
                   "max_output_tokens": "max_tokens", "seed": "seed"}


@dataclass
class Engine:
    """What every episode of one gateway shares: the policy, the family, the run's sampling."""

    policy: Any
    renderer: Any
    render: Render
    sampling: SamplingParams
    tokenizer: Any

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)


@dataclass
class Completion:
    """One generation as the wire APIs answer it."""

    parsed: Parsed
    token_ids: list[int]
    finish_reason: str  # stop | length | tool_calls
    prompt_tokens: int
    segment: int
    fork: Fork | None = None

    @property
    def completion_tokens(self) -> int:
        return len(self.token_ids)


@dataclass
class EpisodeResult:
    """A finished episode: its trainable segments, reward, forks and what was overridden."""

    key_id: str
    task: Any
    trajectories: list[Trajectory]
    reward: float | None
    forks: list[Fork]
    calls: int
    overrides: dict[str, int]
    conversation: list[Message]
    answer: str | None
    agent_answer: Any = None
    error: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def breaks(self) -> int:
        return len(self.forks)


class Episode:
    """One episode's state (see the module docstring).  ``key`` is its secret."""

    def __init__(self, key: str, task: Any, engine: Engine, task_id: str = ""):
        self.key = key
        #: a public handle for logs and results: a hash, so it reveals nothing of the key
        self.key_id = hashlib.sha256(key.encode()).hexdigest()[:12]
        self.task = task
        self.engine = engine
        self.ledger = EpisodeLedger(engine.tokenizer, task_id)
        self.lock = asyncio.Lock()
        self.ended = False
        self.calls = 0
        self.overrides: dict[str, int] = {}
        self.conversation: list[Message] = []
        self.last: Parsed | None = None
        #: Responses API: response id -> its conversation (for previous_response_id)
        self.responses: dict[str, list[Message]] = {}
        self.opened = self.touched = time.monotonic()
        #: calls in flight (an episode with one is never idle) and when the last one came
        self.busy = 0

    async def complete(self, messages: list[Message], tools: list[dict] | None,
                       client: dict[str, Any]) -> Completion:
        """Generate the assistant's next turn for ``messages`` (see the module docstring)."""
        self.busy += 1
        self.touched = time.monotonic()
        try:
            return await self._complete(messages, tools, client)
        finally:
            self.busy -= 1
            self.touched = time.monotonic()

    async def _complete(self, messages: list[Message], tools: list[dict] | None,
                        client: dict[str, Any]) -> Completion:
        if not messages:
            raise BadRequest("messages is empty: send the conversation so far")
        self._override(client)
        engine = self.engine
        try:
            if _text_size(messages) < OFF_LOOP_CHARS:
                ids = engine.render(messages, tools or None)
            else:  # a long conversation: off the loop, so other episodes' calls go on
                ids = await asyncio.to_thread(engine.render, messages, tools or None)
        except BadRequest:
            raise
        except Exception as exc:  # noqa: BLE001 - a template refusing the conversation
            raise BadRequest(f"the {engine.renderer.family} chat template cannot render this "
                             f"conversation: {type(exc).__name__}: {exc}") from None
        async with self.lock:
            if self.ended:
                raise BadRequest("this episode has ended; open a new one", 410,
                                 "episode_ended")
            seg, fork = self._place(ids, messages)
            gen = await engine.policy.generate(list(seg.context), [], engine.sampling)
            parsed = self._parse(gen, ids)
            self.ledger.record(seg, gen.token_ids, gen.logprobs,
                               [{"name": c["name"], "arguments": json.loads(c["arguments"]),
                                 "id": c["id"]} for c in parsed.tool_calls])
            self.calls += 1
            self.conversation = list(messages) + [parsed.message()]
            self.last = parsed
        finish = "length" if gen.finish_reason == "length" else \
            "tool_calls" if parsed.tool_calls else "stop"
        return Completion(parsed, list(gen.token_ids), finish, len(ids), seg.index, fork)

    def _place(self, ids: list[int], messages: list[Message]) -> tuple[Segment, Fork | None]:
        before = len(self.ledger.segments)
        seg = self.ledger.place(ids, lambda: self._why(messages))
        fork = seg.fork if len(self.ledger.segments) > before else None
        return seg, fork

    def _why(self, messages: list[Message]) -> str:
        """Why a render may not extend the ledger: did the client send back what it got?"""
        if self.last is None:
            return "new conversation"
        i = len(self.conversation) - 1
        same = len(messages) > i and all(
            _comparable(m) == _comparable(n) for m, n in zip(messages[:i + 1], self.conversation))
        if same:
            return "template re-rendered history the client sent back unchanged"
        return "client changed history (edited, dropped or reordered messages or reasoning)"

    def _parse(self, gen: Generation, prompt_ids: list[int]) -> Parsed:
        stops = set(self.engine.sampling.stop_token_ids)
        body = list(gen.token_ids)
        while body and body[-1] in stops:
            body.pop()
        # the prompt's tail tells whether the completion starts inside a reasoning block
        # (a prefilled <think>); a family without reasoning never reads it
        tail = self.engine.decode(prompt_ids[-48:]) \
            if getattr(self.engine.renderer, "reasoning", None) is not None else ""
        return parse_completion(self.engine.renderer, self.engine.decode(body), tail)

    def _override(self, client: dict[str, Any]) -> None:
        """Count every client sampling setting the run's settings replaced."""
        for wire, name in CLIENT_SAMPLING.items():
            value = client.get(wire)
            if value is not None and value != getattr(self.engine.sampling, name):
                self.overrides[wire] = self.overrides.get(wire, 0) + 1
        if client.get("stop"):
            self.overrides["stop"] = self.overrides.get("stop", 0) + 1

    def result(self, reward: float | None, agent_answer: Any = None,
               error: str | None = None) -> EpisodeResult:
        trajs = self.ledger.trajectories()
        for traj in trajs:
            traj.metadata.update({"gateway": {"episode": self.key_id,
                                              "segments": len(self.ledger.segments),
                                              "breaks": len(self.ledger.forks),
                                              "overrides": dict(self.overrides)}})
        return EpisodeResult(self.key_id, self.task, trajs, reward, self.ledger.forks,
                             self.calls, dict(self.overrides), self.conversation,
                             self.last.content if self.last else None, agent_answer, error)


def _text_size(messages: list[Message]) -> int:
    return sum(len(m.get("content") or "") + len(m.get("reasoning_content") or "")
               for m in messages)


def sampling_for(base: SamplingParams, renderer: Any) -> SamplingParams:
    """The run's sampling with the family's end-of-turn ids as stops."""
    stops = tuple(dict.fromkeys(tuple(base.stop_token_ids) + tuple(renderer.stop_token_ids())))
    return replace(base, stop_token_ids=stops)


def _comparable(msg: Message) -> tuple:
    calls = tuple((c.get("function", {}).get("name"), repr(c.get("function", {}).get("arguments")))
                  for c in msg.get("tool_calls") or [])
    return ((msg.get("content") or "").strip(), (msg.get("reasoning_content") or "").strip(),
            calls)
