"""Plays probe scripts through the one episode loop (``EpisodeRunner``).

A probe's script is played by a ``ProbePolicy``: the policy side of the loop, behaving like a
real generator.  Its text is encoded with the env's tokenizer and cut after the first stop
string the env asks for and at the env's ``max_new_tokens`` (the runner's limits); what a cut
left unsaid is written on the next turn.  Nothing on the env side is special-cased: every
episode goes through the env's own reset, parse, tools, budgets and reward, and a failure
(an exception out of the env, the deadline) is what the runner makes of it for every trainer:
a kept trajectory flagged ``infra_failed``, i.e. masked.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from tir_envs.audit.candidates import Candidates
from tir_envs.audit.context import ProbeContext
from tir_envs.audit.probes import Action, Script
from tir_envs.rollout.policy import Generation, SamplingParams
from tir_envs.rollout.runner import EpisodeRunner
from tir_envs.rollout.stops import cut_at_stop, first_stop

#: the generation cap asked for: the env's own ``max_new_tokens`` is always the lower one
MAX_NEW_TOKENS = 1 << 30


@dataclass
class EpisodeRecord:
    """What one scripted episode earned and how the env saw it."""

    task_id: str
    reward: float = 0.0
    correct: bool | None = None
    answered: bool | None = None
    answer: str | None = None
    infra_failed: bool = False
    void: bool = False
    statuses: list[str] = field(default_factory=list)
    stop_reason: str = ""
    error: str | None = None      # the runner's failure record (an env exception, the deadline)
    seconds: float = 0.0
    #: the most control-token ids in one observation (the framing's, unless text became them)
    env_specials: int = 0

    @property
    def masked(self) -> bool:
        """A trainer would drop this episode as the env's fault (infra, crash, deadline)."""
        return self.infra_failed or self.error is not None

    def to_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "reward": self.reward, "correct": self.correct,
                "answered": self.answered, "answer": _short(self.answer),
                "infra_failed": self.infra_failed, "void": self.void,
                "statuses": self.statuses, "stop_reason": self.stop_reason,
                "error": self.error, "seconds": round(self.seconds, 3),
                "env_specials": self.env_specials}


def _short(text: str | None, limit: int = 160) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} chars)"


class Writer:
    """A script being written, turn by turn (see the module docstring)."""

    def __init__(self, script: Script, ctx: ProbeContext):
        self.pieces: deque = deque(script)
        self.ctx = ctx
        self.buffer = ""

    def next_text(self, stop: list[str]) -> tuple[str, bool]:
        """The text the policy means to write now, and whether stop strings apply to it."""
        while not self.buffer and self.pieces:
            piece = self.pieces.popleft()
            piece = piece(self.ctx) if callable(piece) else piece
            if isinstance(piece, Action):
                return piece.text, False
            self.buffer = piece
        while (first_stop(self.buffer, stop) is None and self.pieces
               and isinstance(self.pieces[0], str)):
            self.buffer += self.pieces.popleft()
        return self.buffer, True

    def sent(self, text: str, written: str, streamed: bool) -> None:
        """``written`` of ``text`` went out; a streamed rest is written next turn."""
        if streamed:
            self.buffer = text[len(written):] if text.startswith(written) else ""


class ProbePolicy:
    """The policy of one scripted episode: a ``Writer`` fed the observations it reads back from
    its context (everything after its own last action)."""

    def __init__(self, env: Any, candidates: Candidates, build: Callable, task: Any = None):
        self.env, self.codec, self.tokenizer = env, env.codec, env.tokenizer
        self.candidates, self.build = candidates, build
        self.task = task  # the episode's task (default: the env's, read at the first action)
        self.ctx: ProbeContext | None = None
        self.writer: Writer | None = None
        self.seen = 0  # context ids accounted for: prompt, observations, our own actions

    async def generate(self, prompt_ids: Sequence[int], stop: Sequence[str],
                       sampling: SamplingParams) -> Generation:
        context = list(prompt_ids)
        if self.ctx is None:
            self.ctx = ProbeContext(self.env, self.task or self.env.task, self.candidates,
                                    self.codec.decode(context))
            self.writer = Writer(self.build(self.ctx), self.ctx)
        else:
            self.ctx.observations.append(self.codec.decode(context[self.seen:]))
        self.ctx.max_new_tokens = sampling.max_tokens
        stop = list(stop)
        text, streamed = self.writer.next_text(stop)
        ids = self.codec.encode(text)
        cut = cut_at_stop(ids, self.codec.decode, stop if streamed else [],
                          max_tokens=sampling.max_tokens)
        ids = ids[:cut.length]
        written = self.codec.decode(ids)
        self.writer.sent(text, written, streamed)
        self.seen = len(context) + len(ids)
        return Generation(ids, None, cut.finish_reason, cut.stop_reason, text=written)


async def play(runner: EpisodeRunner, env: Any, index: int, candidates: Candidates,
               build: Callable) -> EpisodeRecord:
    """One episode of task ``index`` with the script ``build(ctx)``."""
    policy = ProbePolicy(env, candidates, build)
    traj = await runner.run(policy, options={"index": index},
                            sampling=SamplingParams(max_tokens=MAX_NEW_TOKENS))
    if traj.failure is not None and traj.failure.kind == "policy_error":
        # the script itself broke (a probe's bug, a protocol that cannot write it): that is
        # no verdict on the env
        raise RuntimeError(f"the probe's script failed on task {traj.task_id}: "
                           f"{traj.failure.message}")
    return _record(traj, control_ids(env.tokenizer))


def control_ids(tokenizer: Any) -> frozenset[int]:
    """The ids of the tokenizer's special and added tokens: chat framing, never text's."""
    ids = set(getattr(tokenizer, "all_special_ids", []) or [])
    ids |= set((getattr(tokenizer, "added_tokens_encoder", {}) or {}).values())
    return frozenset(i for i in ids if isinstance(i, int))


def most_specials(ids: Sequence[int], spans: Sequence[tuple[int, int]],
                  specials: frozenset[int]) -> int:
    """The most control ids in any one of ``spans`` of ``ids`` (0 without spans)."""
    return max((sum(t in specials for t in ids[a:b]) for a, b in spans), default=0)


def _record(traj: Any, specials: frozenset[int] = frozenset()) -> EpisodeRecord:
    return EpisodeRecord(
        task_id=str(traj.task_id), reward=float(traj.reward), correct=traj.correct,
        answered=traj.answered, answer=None if traj.answer is None else str(traj.answer),
        infra_failed=bool(traj.infra_failed),
        void=traj.num_tool_calls == 0 and traj.answered is False,
        statuses=[t.status for t in traj.turns], stop_reason=traj.stop_reason,
        error=None if traj.failure is None else f"{traj.failure.kind}: {traj.failure.message}",
        seconds=float(traj.metadata.get("episode_s", 0.0)),
        env_specials=most_specials(traj.token_ids, [t.observation_span for t in traj.turns],
                                   specials))
