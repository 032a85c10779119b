"""One agent episode behind the gateway: render a request, place it in the ledger, generate.

Every call of every wire API ends here as ``GatewayEpisode.complete(messages, tools, client)``:
the conversation is rendered to ids with the family's serving template (what a server would give
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

from tir_envs.gateway.conversation import BadRequest, Message, Parsed
from tir_envs.gateway.library_families import parse_family
from tir_envs.gateway.ledger import (CLIENT_REWRITE, SIDE_CONVERSATION, TEMPLATE_RULE,
                                     EpisodeLedger, Fork, Segment)
from tir_envs.rollout.policy import Generation, SamplingParams
from tir_envs.trajectory import Trajectory

Render = Callable[[list[Message], "list[dict] | None"], list[int]]

#: what a finished episode does with the segments of its side conversations (``train``: they
#: are samples like the others; ``skip``: kept in ``EpisodeResult.side_trajectories`` only)
SIDE_SEGMENTS = ("skip", "train")
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
    side_segments: str = "skip"

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
    #: segments of the episode's side conversations (``Engine.side_segments``: ``skip`` keeps
    #: them here only, ``train`` in ``trajectories`` too)
    side_trajectories: list[Trajectory] = field(default_factory=list)
    #: tool calls the policy wrote (parsed from its tokens), over every segment
    tool_calls: int = 0
    #: what the client claims about its tools (results sent back, of them flagged as errors,
    #: results for calls the policy never made): never read by rewards or masks
    client_tools: dict[str, int] = field(default_factory=dict)
    #: history rewrites of the episode's own conversation: forks caused by the client or the
    #: template (a side conversation's opening, or a fork inside one, is not counted)
    breaks: int = 0


class GatewayEpisode:
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
        #: per conversation of the episode (a side call opens another): its opening system
        #: text -> index, and its last request with the answer, and that answer
        self.openings: dict[tuple, int] = {}
        self.histories: dict[int, tuple[list[Message], Parsed]] = {}
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
            self.ledger.client_results(messages)
            gen = await engine.policy.generate(list(seg.context), [], engine.sampling)
            parsed = self._parse(gen, ids)
            self.ledger.record(seg, gen.token_ids, gen.logprobs,
                               [{"name": c["name"], "arguments": json.loads(c["arguments"]),
                                 "id": c["id"]} for c in parsed.tool_calls])
            self.calls += 1
            self.conversation = list(messages) + [parsed.message()]
            self.last = parsed
            self.histories[seg.conversation] = (self.conversation, parsed)
        finish = "length" if gen.finish_reason == "length" else \
            "tool_calls" if parsed.tool_calls else "stop"
        return Completion(parsed, list(gen.token_ids), finish, len(ids), seg.index, fork)

    def _place(self, ids: list[int], messages: list[Message]) -> tuple[Segment, Fork | None]:
        before = len(self.ledger.segments)
        opening = _opening(messages)
        conv = self.openings.get(opening)
        seg = self.ledger.place(ids, lambda: self._why(messages, conv))
        fork = seg.fork if len(self.ledger.segments) > before else None
        if fork is not None or before == 0:
            seg.conversation = len(self.openings) if conv is None else conv
        self.openings.setdefault(opening, seg.conversation)
        return seg, fork

    def _why(self, messages: list[Message], conv: int | None) -> tuple[str, str]:
        """Why a render does not extend the ledger: another conversation (a system prompt no
        segment opened with), or history the client or the template rewrote (did the client
        send back what it got?)."""
        if conv is None:
            return SIDE_CONVERSATION, ("another conversation on this key (its system prompt "
                                       "opened no segment): a side call, not a rewrite")
        if conv not in self.histories:
            return CLIENT_REWRITE, "client changed history (a conversation restarted)"
        answered = self.histories[conv][0]
        i = len(answered) - 1
        same = len(messages) > i and all(
            _comparable(m) == _comparable(n) for m, n in zip(messages[:i + 1], answered))
        if same:
            return TEMPLATE_RULE, "template re-rendered history the client sent back unchanged"
        return CLIENT_REWRITE, ("client changed history (edited, dropped or reordered messages "
                                "or reasoning)")

    def main_conversation(self) -> int:
        """The episode's own conversation: the one with the most calls (the first on a tie);
        the others are side conversations (a harness's title or summary calls)."""
        calls: dict[int, int] = {}
        for seg in self.ledger.segments:
            calls[seg.conversation] = calls.get(seg.conversation, 0) + seg.calls
        return min(calls, key=lambda c: (-calls[c], c)) if calls else 0

    def final(self) -> tuple[list[Message], Parsed | None, Trajectory | None]:
        """The main conversation's last request with its answer, the answer, and its last
        trainable segment: what a host reward grades (never a side call's answer)."""
        main = self.main_conversation()
        conversation, last = self.histories.get(main, (self.conversation, self.last))
        segs = [s.trajectory for s in self.ledger.segments
                if s.conversation == main and s.trajectory.num_policy_tokens]
        return conversation, last, segs[-1] if segs else None

    def _parse(self, gen: Generation, prompt_ids: list[int]) -> Parsed:
        stops = set(self.engine.sampling.stop_token_ids)
        body = list(gen.token_ids)
        while body and body[-1] in stops:
            body.pop()
        # the prompt's tail tells whether the completion starts inside a reasoning block
        # (a prefilled <think>); a family without reasoning never reads it
        tail = self.engine.decode(prompt_ids[-48:]) \
            if getattr(self.engine.renderer, "reasoning", None) is not None else ""
        return parse_family(self.engine.renderer, self.engine.decode(body), tail)

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
        main = self.main_conversation()
        ledger = self.ledger
        breaks = sum(f.rewrite and ledger.segments[f.segment].conversation == main
                     for f in ledger.forks)
        own, side = [], []
        for seg in ledger.segments:
            if not seg.trajectory.num_policy_tokens:
                continue
            seg.trajectory.metadata.update({"gateway": {
                "episode": self.key_id, "segments": len(ledger.segments),
                "breaks": breaks, "side": seg.conversation != main,
                "conversation": seg.conversation, "overrides": dict(self.overrides)}})
            (own if seg.conversation == main else side).append(seg.trajectory)
        trajs = own + side if self.engine.side_segments == "train" else own
        trajs.sort(key=lambda t: t.metadata["segment"])
        conversation, last, _ = self.final()
        results = [r for s in ledger.segments
                   for r in s.trajectory.metadata.get("client_tool_results", [])]
        client = {"results": len(results), "errors": sum(r["is_error"] is True for r in results),
                  "flagged": sum(r["is_error"] is not None for r in results),
                  "unmatched": ledger.unmatched_results}
        return EpisodeResult(self.key_id, self.task, trajs, reward, ledger.forks,
                             self.calls, dict(self.overrides), conversation,
                             last.content if last else None, agent_answer, error,
                             side_trajectories=side, tool_calls=ledger.emitted_calls(),
                             client_tools=client, breaks=breaks)


def _text_size(messages: list[Message]) -> int:
    return sum(len(m.get("content") or "") + len(m.get("reasoning_content") or "")
               for m in messages)


def sampling_for(base: SamplingParams, renderer: Any) -> SamplingParams:
    """The run's sampling with the family's end-of-turn ids as stops."""
    stops = tuple(dict.fromkeys(tuple(base.stop_token_ids) + tuple(renderer.stop_token_ids())))
    return replace(base, stop_token_ids=stops)


def _opening(messages: list[Message]) -> tuple:
    """What tells one conversation from another: the system text it opens with."""
    out = []
    for m in messages:
        if m.get("role") != "system":
            break
        out.append((m.get("content") or "").strip())
    return tuple(out)


def _comparable(msg: Message) -> tuple:
    calls = tuple((c.get("function", {}).get("name"), repr(c.get("function", {}).get("arguments")))
                  for c in msg.get("tool_calls") or [])
    return ((msg.get("content") or "").strip(), (msg.get("reasoning_content") or "").strip(),
            calls)
