"""One episode's ledger behind the gateway: trainable segments, forked where history broke.

A chat API client sends the whole conversation at every call and the gateway renders it to
token ids.  When that render starts with a segment's context (its prompt, every sampled
completion and every token the gateway inserted so far) only the new tokens are appended
(mask 0) and the policy continues that segment: one trajectory, token-exact.  When no segment's
context is a prefix of the render, the client (or the chat template) rewrote history: the
episode **forks** a new segment whose prompt is the whole render.  Nothing is retokenized
silently: each fork records the segment it left, the first differing token, the decoded
text around it and its **cause**, so a run can report breaks per episode:

* ``client_rewrite``: the client sent history other than what the gateway answered (dropped
  reasoning, edited or compacted context, reordered calls);
* ``template_rule``: the client sent history back unchanged, but the family's template
  rewrites it by its own rule (DeepSeek-R1 and harmony drop earlier reasoning; harmony writes
  an earlier final answer's ``<|return|>`` as ``<|end|>``);
* ``side_conversation``: not a rewrite at all: a request of another conversation on the same
  key (a harness's title or summary call: a system prompt no segment of the episode opened
  with).  Its segments form a conversation of their own; ``breaks`` counts rewrites only.  Every segment is a ``Trajectory``
(sampled tokens mask 1 with their logprobs), the object every trainer consumes.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from tir_envs.trajectory import Trajectory, Turn

#: tokens of decoded context kept on each side of a fork point
FORK_CONTEXT = 24

CLIENT_REWRITE = "client_rewrite"
TEMPLATE_RULE = "template_rule"
SIDE_CONVERSATION = "side_conversation"
#: causes that are history rewrites: what an episode's ``breaks`` counts
REWRITES = (CLIENT_REWRITE, TEMPLATE_RULE)


@dataclass
class Fork:
    """Why a segment was started: the render did not extend segment ``parent``'s context."""

    segment: int
    parent: int
    #: index of the first token where the render and the parent's context differ
    at: int
    parent_tokens: int
    request_tokens: int
    #: decoded text around ``at``: what the ledger holds, and what the request rendered
    ledger_text: str
    request_text: str
    reason: str
    #: ``CLIENT_REWRITE``, ``TEMPLATE_RULE`` or ``SIDE_CONVERSATION`` (module docstring)
    cause: str = CLIENT_REWRITE

    @property
    def rewrite(self) -> bool:
        """A history rewrite (what ``breaks`` counts), not a separate conversation."""
        return self.cause in REWRITES

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Segment:
    """A trainable span of an episode: one ``Trajectory`` and its running context."""

    index: int
    trajectory: Trajectory
    fork: Fork | None = None
    #: prompt + token_ids, kept whole (machine ints: 8 bytes a token, not a Python int's 36)
    #: so the prefix check is one slice compare
    context: array = field(default_factory=lambda: array("q"))
    calls: int = 0
    #: which conversation of the episode it belongs to (0: the first one opened)
    conversation: int = 0

    def extends(self, ids: Sequence[int]) -> bool:
        n = len(self.context)
        return len(ids) >= n and array("q", ids[:n]) == self.context


class EpisodeLedger:
    """The segments of one episode (see the module docstring)."""

    def __init__(self, tokenizer: Any, task_id: str = ""):
        self.tokenizer = tokenizer
        self.task_id = task_id
        self.segments: list[Segment] = []
        self.current: Segment | None = None
        #: call id -> (segment, turn index, tool name) of every call the policy emitted
        self.emitted: dict[str, tuple[Segment, int, str]] = {}
        #: tool results the client sent whose call id the policy never emitted
        self.unmatched_results = 0
        self._answered: set[Any] = set()

    @property
    def forks(self) -> list[Fork]:
        return [s.fork for s in self.segments if s.fork is not None]

    @property
    def breaks(self) -> int:
        """History rewrites (forks of a conversation, not the opening of another one)."""
        return sum(f.rewrite for f in self.forks)

    def place(self, ids: Sequence[int],
              why: Callable[[], tuple[str, str]] = lambda: (CLIENT_REWRITE, "")) -> Segment:
        """The segment a request rendered as ``ids`` continues (new tokens appended, mask 0),
        or a new one forked from ``ids`` (``why()`` gives ``(cause, reason)``, asked only then);
        afterwards ``segment.context == ids``."""
        ids = list(ids)
        for seg in ([self.current] if self.current else []) + self.segments[::-1]:
            if seg.extends(ids):
                self._append_env(seg, ids[len(seg.context):])
                self.current = seg
                return seg
        return self._fork(ids, *why())

    def _append_env(self, seg: Segment, new: list[int]) -> None:
        if not new:
            return
        traj = seg.trajectory
        start, end = traj.append(new, policy=False)
        if traj.turns and traj.turns[-1].observation_span == (0, 0) \
                and traj.turns[-1].action_span[1] == start:
            traj.turns[-1].observation_span = (start, end)
        seg.context.extend(new)

    def _fork(self, ids: list[int], cause: str, reason: str) -> Segment:
        fork = None
        parent = self.current
        if parent is not None:
            at = first_difference(parent.context, ids)
            fork = Fork(segment=len(self.segments), parent=parent.index, at=at,
                        parent_tokens=len(parent.context), request_tokens=len(ids),
                        ledger_text=self._around(parent.context, at),
                        request_text=self._around(ids, at), reason=reason,
                        cause=cause)
        traj = Trajectory(prompt_ids=list(ids), task_id=self.task_id)
        seg = Segment(index=len(self.segments), trajectory=traj, fork=fork, context=array("q", ids))
        if fork is not None:
            traj.metadata["fork"] = fork.to_dict()
        traj.metadata["segment"] = seg.index
        self.segments.append(seg)
        self.current = seg
        return seg

    def _around(self, ids: Sequence[int], at: int) -> str:
        lo, hi = max(0, at - FORK_CONTEXT), min(len(ids), at + FORK_CONTEXT)
        head = self.tokenizer.decode(list(ids[lo:at]), skip_special_tokens=False)
        tail = self.tokenizer.decode(list(ids[at:hi]), skip_special_tokens=False)
        return f"{head}⟦{tail}" if at < len(ids) else f"{head}⟦<end>"

    def record(self, seg: Segment, ids: Sequence[int], logprobs: Sequence[float] | None,
               tool_calls: list[dict[str, Any]] | None = None) -> Turn:
        """Append a sampled completion (mask 1) to ``seg`` as a new turn."""
        traj = seg.trajectory
        span = traj.append(list(ids), policy=True,
                           logprobs=list(logprobs) if logprobs is not None else None)
        turn = Turn(index=len(traj.turns), action_span=span, tool_calls=tool_calls or [])
        traj.turns.append(turn)
        seg.context.extend(int(i) for i in ids)
        seg.calls += 1
        for call in turn.tool_calls:
            if call.get("id"):
                self.emitted[call["id"]] = (seg, turn.index, call.get("name", ""))
        return turn

    def client_results(self, messages: Sequence[dict[str, Any]]) -> None:
        """Note the tool results a request carries, once each, on the turn that emitted the
        call (``metadata["client_tool_results"]`` of its segment).  They are the client's
        claims (it ran the tool, it failed): kept apart from ``Turn.tool_results``, which
        rewards and masks read and only the host fills."""
        for m in messages:
            if m.get("role") != "tool":
                continue
            hit = self.emitted.pop(m.get("tool_call_id") or "", None)
            if hit is None:
                if m.get("tool_call_id") not in self._answered:
                    self.unmatched_results += 1
                    self._answered.add(m.get("tool_call_id"))
                continue
            seg, turn, name = hit
            self._answered.add(m["tool_call_id"])
            seg.trajectory.metadata.setdefault("client_tool_results", []).append(
                {"turn": turn, "call_id": m["tool_call_id"], "tool": name,
                 "is_error": m.get("is_error"), "client_reported": True})

    def trajectories(self) -> list[Trajectory]:
        """The trainable segments: those holding at least one sampled token."""
        return [s.trajectory for s in self.segments if s.trajectory.num_policy_tokens]

    def emitted_calls(self) -> int:
        """Tool calls the policy wrote (parsed from its own tokens), over every segment."""
        return sum(len(t.tool_calls) for s in self.segments for t in s.trajectory.turns)


def first_difference(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n
