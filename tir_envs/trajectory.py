"""The token ledger: everything a trainer needs about one episode, in one object.

``prompt_ids`` then ``token_ids`` (every token after the prompt, in order), with a
``loss_mask`` that is 1 exactly on tokens the policy generated, the sampler's ``logprobs`` for
those tokens, and ``token_rewards`` credited at the last policy token of each turn.  ``turns``
say which spans are actions and which are observations, what was called and how it went.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal, Sequence

import numpy as np

from tir_envs.status import Status


@dataclass(eq=False)
class Turn:
    """One policy action and the env's answer to it.  Spans index ``Trajectory.token_ids``.

    Equality ignores measured latencies: two runs of the same episode are the same episode
    (Gymnasium's determinism check compares step infos).
    """

    index: int
    action_span: tuple[int, int]
    observation_span: tuple[int, int] = (0, 0)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    #: one record per call: the tool's own metadata, then the host's facts: ``tool``,
    #: ``status``, ``latency_s``, ``chars`` (of the result text), ``executed`` (the tool ran)
    #: and flags (``parse_error``, ``unknown_tool``, ``exhausted``)
    tool_results: list[dict[str, Any]] = field(default_factory=list)
    reward: float = 0.0
    reward_components: dict[str, float] = field(default_factory=dict)
    status: Status = Status.OK  # Status.of(the calls' statuses)
    notes: list[str] = field(default_factory=list)
    #: on the episode's last turn: the final answer as the protocol read it (what was graded)
    answer: str | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Turn):
            return NotImplemented
        return _without_latency(self.to_dict()) == _without_latency(other.to_dict())

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (lists and dicts copied; ``dataclasses.asdict``'s recursive deep
        copy cost more than the rest of writing a benchmark record)."""
        d = {f.name: _copied(getattr(self, f.name)) for f in fields(self)}
        d["action_span"] = list(self.action_span)
        d["observation_span"] = list(self.observation_span)
        d["status"] = Status(self.status).value
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Turn":
        d = dict(d)
        d["action_span"] = tuple(d["action_span"])
        d["observation_span"] = tuple(d.get("observation_span", (0, 0)))
        d["status"] = Status(d.get("status", "ok"))
        return cls(**d)


#: why an episode could not run to its end: the policy failed to generate, the env or a tool
#: raised (infrastructure), or the episode ran past its deadline
FailureKind = Literal["policy_error", "infra", "timeout"]
#: the ``stop_reason`` a failed episode gets, named for what happened
FAILURE_STOP_REASONS = {"policy_error": "policy_error", "infra": "error", "timeout": "timeout"}


@dataclass(frozen=True)
class EpisodeFailure:
    """The one record of an episode that did not run to its end (``Trajectory.failure``).

    Its ledger is kept as far as it got and flagged ``infra_failed`` so a trainer can drop it:
    the failure is not the model's, and its reward is not silently 0."""

    kind: FailureKind
    message: str

    def __post_init__(self) -> None:
        if self.kind not in FAILURE_STOP_REASONS:
            raise ValueError(f"EpisodeFailure.kind must be one of {sorted(FAILURE_STOP_REASONS)}, "
                             f"got {self.kind!r}")

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message}


def _copied(value: Any) -> Any:
    """A copy of nested dicts and lists (leaves shared: they are immutable in a ledger)."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_copied(v) for v in value)
    return value


def _without_latency(d: dict[str, Any]) -> dict[str, Any]:
    results = [{k: v for k, v in r.items() if k != "latency_s"} for r in d["tool_results"]]
    return {**d, "tool_results": results}


@dataclass
class Trajectory:
    """The ledger of one episode (see the module docstring)."""

    prompt_ids: list[int] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)  # 0.0 where no logprob was given
    token_rewards: list[float] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    task_id: str = ""
    env_id: str = ""
    reward: float = 0.0
    reward_components: dict[str, float] = field(default_factory=dict)
    terminated: bool = False
    truncated: bool = False
    stop_reason: str = ""  # see docs/concepts.md: answered | no_answer | max_turns | ...
    retokenized: bool = False  # some action arrived as text and had to be encoded
    drift: int = 0  # ids that differ from a fresh encode of the whole text (codec.drift)
    has_logprobs: bool = True
    infra_failed: bool = False
    correct: bool | None = None   # the reward's verdict (None: no gold to judge against)
    answered: bool | None = None  # the policy gave a well-formed final answer
    answer: str | None = None     # that answer, as the reward extracted it
    failure: EpisodeFailure | None = None  # set when the episode could not run to its end
    metadata: dict[str, Any] = field(default_factory=dict)

    # -- building -------------------------------------------------------------------
    def append(self, ids: Sequence[int], policy: bool,
               logprobs: Sequence[float] | None = None) -> tuple[int, int]:
        """Append a span of policy (mask 1) or env (mask 0) tokens; return its span."""
        start = len(self.token_ids)
        n = len(ids)
        self.token_ids.extend(int(i) for i in ids)
        self.loss_mask.extend([1 if policy else 0] * n)
        self.token_rewards.extend([0.0] * n)
        if logprobs is None:
            if policy and n:
                self.has_logprobs = False
            self.logprobs.extend([0.0] * n)
        else:
            if len(logprobs) != n:
                raise ValueError(f"got {len(logprobs)} logprobs for {n} tokens; pass one "
                                 "logprob per generated token")
            self.logprobs.extend(float(x) for x in logprobs)
        return start, start + n

    def fail(self, failure: EpisodeFailure) -> None:
        """Record why the episode stopped early: flagged for a trainer to drop, cut short, the
        failure also in ``metadata["failure"]`` (its JSON form, for readers of the JSONL)."""
        self.failure = failure
        self.infra_failed = True
        self.truncated = True
        self.stop_reason = FAILURE_STOP_REASONS[failure.kind]
        self.metadata["failure"] = failure.to_dict()

    def credit(self, reward: float) -> None:
        """Add ``reward`` at the last policy token (where per-turn and outcome rewards land)."""
        for i in range(len(self.loss_mask) - 1, -1, -1):
            if self.loss_mask[i]:
                self.token_rewards[i] += float(reward)
                return
        # No policy token yet: nothing can carry it; keep it on the episode total only.

    # -- reading --------------------------------------------------------------------
    @property
    def num_policy_tokens(self) -> int:
        return int(sum(self.loss_mask))

    @property
    def num_tool_calls(self) -> int:
        """Calls a tool actually executed (not parse errors, unknown tools or spent budgets)."""
        return sum(bool(r.get("executed")) for t in self.turns for r in t.tool_results)

    @property
    def num_parse_errors(self) -> int:
        """Calls the env could not understand (no tags, bad JSON, unclosed blocks)."""
        return sum(bool(r.get("parse_error")) for t in self.turns for r in t.tool_results)

    def tool_counts(self) -> dict[str, int]:
        """Executed calls by tool name."""
        counts: dict[str, int] = {}
        for t in self.turns:
            for r in t.tool_results:
                if r.get("executed"):
                    counts[r["tool"]] = counts.get(r["tool"], 0) + 1
        return counts

    @property
    def input_ids(self) -> list[int]:
        return self.prompt_ids + self.token_ids

    def segments(self, tokenizer) -> list[tuple[str, str]]:
        """``[(kind, text), ...]`` with kind ``prompt``, ``action`` or ``observation``,
        in order.  Decoded span by span, so their concatenation is the episode text."""
        out = [("prompt", _decode(tokenizer, self.prompt_ids))]
        for kind, (a, b) in self._spans():
            if b > a:
                out.append((kind, _decode(tokenizer, self.token_ids[a:b])))
        return out

    def _spans(self) -> Iterator[tuple[str, tuple[int, int]]]:
        """Maximal runs of equal loss mask, labelled action/observation."""
        start = 0
        n = len(self.loss_mask)
        for i in range(1, n + 1):
            if i == n or self.loss_mask[i] != self.loss_mask[start]:
                yield ("action" if self.loss_mask[start] else "observation"), (start, i)
                start = i

    def text(self, tokenizer) -> str:
        return "".join(t for _, t in self.segments(tokenizer))

    # -- serialisation --------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "turns"}
        d["turns"] = [t.to_dict() for t in self.turns]
        d["failure"] = None if self.failure is None else self.failure.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Trajectory":
        d = dict(d)
        turns = [Turn.from_dict(t) for t in d.pop("turns", [])]
        if isinstance(d.get("failure"), dict):
            d["failure"] = EpisodeFailure(**d["failure"])
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown trajectory fields {sorted(unknown)}; "
                             f"expected a subset of {sorted(known)}")
        return cls(turns=turns, **d)

    def to_json(self) -> str:
        """One JSON line, valid UTF-8 whatever the episode holds: a lone surrogate (a policy
        can send ``"\\ud800"`` in a tool call's JSON, and a tool echo it) is written as its
        JSON escape, which reads back as the same string."""
        text = json.dumps(self.to_dict(), ensure_ascii=False, allow_nan=False)
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _decode(tokenizer, ids: Sequence[int]) -> str:
    return tokenizer.decode(list(ids), skip_special_tokens=False,
                            clean_up_tokenization_spaces=False)


def write_jsonl(trajectories: Iterable[Trajectory], path: str | Path) -> int:
    """Write trajectories one JSON object per line; returns how many were written."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for t in trajectories:
            f.write(t.to_json() + "\n")
            n += 1
    return n


def read_jsonl(path: str | Path) -> list[Trajectory]:
    """Read trajectories written by ``write_jsonl`` (or streamed by the rollout engine)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                out.append(Trajectory.from_dict(json.loads(line)))
            except (json.JSONDecodeError, TypeError, ValueError, KeyError) as exc:
                raise ValueError(f"{path}:{lineno}: not a trajectory record: {exc}") from exc
    return out


def to_padded(trajectories: Sequence[Trajectory], pad_id: int = 0,
              max_length: int | None = None) -> dict[str, np.ndarray]:
    """Right-padded arrays over prompt + response for a trainer.

    Keys: ``input_ids``, ``attention_mask``, ``loss_mask`` (0 on prompt and padding),
    ``logprobs``, ``token_rewards``, ``prompt_lengths``.  ``max_length`` truncates from the
    right (the prompt is kept) and must leave room for the longest prompt.
    """
    if not trajectories:
        raise ValueError("to_padded needs at least one trajectory")
    lengths = [len(t.prompt_ids) + len(t.token_ids) for t in trajectories]
    width = max(lengths) if max_length is None else max_length
    longest_prompt = max(len(t.prompt_ids) for t in trajectories)
    if width < longest_prompt:
        raise ValueError(f"max_length={max_length} is shorter than the longest prompt "
                         f"({longest_prompt} tokens)")
    b = len(trajectories)
    out = {
        "input_ids": np.full((b, width), pad_id, dtype=np.int64),
        "attention_mask": np.zeros((b, width), dtype=np.int64),
        "loss_mask": np.zeros((b, width), dtype=np.float32),
        "logprobs": np.zeros((b, width), dtype=np.float32),
        "token_rewards": np.zeros((b, width), dtype=np.float32),
        "prompt_lengths": np.array([len(t.prompt_ids) for t in trajectories], dtype=np.int64),
    }
    for row, t in enumerate(trajectories):
        p = len(t.prompt_ids)
        n = min(len(t.token_ids), width - p)
        out["input_ids"][row, :p] = t.prompt_ids
        out["input_ids"][row, p:p + n] = t.token_ids[:n]
        out["attention_mask"][row, :p + n] = 1
        out["loss_mask"][row, p:p + n] = t.loss_mask[:n]
        out["logprobs"][row, p:p + n] = t.logprobs[:n]
        out["token_rewards"][row, p:p + n] = t.token_rewards[:n]
    return out

