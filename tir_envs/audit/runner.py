"""Plays probe scripts through an env's public async API (``areset``/``astep`` on token ids).

The policy side behaves like a real generator: a script's text is encoded with the env's
tokenizer, cut after the first stop string the env asked for (``info["stop_sequences"]``) and
at ``info["max_new_tokens"]``; what a cut left unsaid is written on the next turn.  Nothing on
the env side is special-cased: every episode goes through the env's own parse, tools, budgets
and reward.  An exception out of the env, or an episode past its deadline, is recorded as a
masked episode (a rollout engine would keep it flagged and a trainer would drop it).
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from tir_envs.audit.candidates import Candidates
from tir_envs.audit.context import ProbeContext
from tir_envs.audit.probes import Action, Script
from tir_envs.rollout.stops import cut_at_stop, first_stop

#: actions per episode at most, whatever the env's budgets (a probe never needs more)
MAX_STEPS = 64


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
    error: str | None = None      # an exception out of the env, or the deadline

    @property
    def masked(self) -> bool:
        """A trainer would drop this episode as the env's fault (infra, crash, deadline)."""
        return self.infra_failed or self.error is not None

    def to_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "reward": self.reward, "correct": self.correct,
                "answered": self.answered, "answer": _short(self.answer),
                "infra_failed": self.infra_failed, "void": self.void,
                "statuses": self.statuses, "stop_reason": self.stop_reason,
                "error": self.error}


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


async def play(env: Any, index: int, candidates: Candidates, build, timeout_s: float
               ) -> EpisodeRecord:
    """One episode of task ``index`` with the script ``build(ctx)`` (see the module doc)."""
    task_id = str(env.tasks[index].id)
    try:
        return await asyncio.wait_for(_play(env, index, candidates, build), timeout_s)
    except asyncio.TimeoutError:
        return EpisodeRecord(task_id, error=f"no end within the {timeout_s:g}s deadline")
    except Exception as exc:  # noqa: BLE001 - an env that raises is the finding itself
        return EpisodeRecord(task_id, error=f"{type(exc).__name__}: {exc}"[:300])


async def _play(env: Any, index: int, candidates: Candidates, build) -> EpisodeRecord:
    obs, info = await env.areset(options={"index": index})
    codec = env.codec
    ctx = ProbeContext(env, env.task, candidates, codec.decode(obs["tokens"].tolist()))
    writer = Writer(build(ctx), ctx)
    for _ in range(MAX_STEPS):
        stop = list(info["stop_sequences"])
        text, streamed = writer.next_text(stop)
        ids = codec.encode(text)
        cut = cut_at_stop(ids, codec.decode, stop if streamed else [],
                          max_tokens=max(0, int(info["max_new_tokens"])))
        ids = ids[:cut.length]
        writer.sent(text, codec.decode(ids), streamed)
        obs, _, terminated, truncated, info = await env.astep(ids)
        ctx.observations.append(codec.decode(obs["tokens"].tolist()))
        if terminated or truncated:
            return _record(info["trajectory"])
    raise RuntimeError(f"the episode did not end within {MAX_STEPS} actions")


def _record(traj: Any) -> EpisodeRecord:
    return EpisodeRecord(
        task_id=str(traj.task_id), reward=float(traj.reward), correct=traj.correct,
        answered=traj.answered, answer=None if traj.answer is None else str(traj.answer),
        infra_failed=bool(traj.infra_failed),
        void=traj.num_tool_calls == 0 and traj.answered is False,
        statuses=[t.status for t in traj.turns], stop_reason=traj.stop_reason)
