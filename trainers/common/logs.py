"""The per-episode numbers an adapter hands its trainer (OpenRLHF's ``extra_logs``, verl's
``extra_fields``, TRL's logged metrics).

OpenRLHF stacks each key over the batch and averages it, and it refuses a batch whose
episodes carry different keys, so every episode of one env reports the same keys: tool
counts for every tool the env has, statuses for every ``Status``, even when zero.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from tir_envs.task import Task
from tir_envs.tools.base import Status
from tir_envs.trajectory import Trajectory

PREFIX = "tir/"


def _flag(value: bool | None) -> float:
    """1/0, or NaN when the env has no verdict (e.g. no gold answer)."""
    return math.nan if value is None else float(bool(value))


def tool_selection(trajectory: Trajectory, task: Task | None) -> float | None:
    """AutoTIR's Tool Selection for one episode: the share of executed tool calls made with the
    task's ground-truth tool (``task.meta["tool"]``).  ``None`` where it is undefined: no
    ground-truth tool (open-domain tasks, envs without one) or no call made."""
    gold = task.meta.get("tool") if task is not None else None
    counts = trajectory.tool_counts()
    total = sum(counts.values())
    if gold is None or total == 0:
        return None
    return counts.get(gold, 0) / total


def episode_logs(trajectory: Trajectory, task: Task | None, tool_names: Iterable[str],
                 **flags: float) -> dict[str, float]:
    """``extra_logs`` for one episode.  ``flags`` are the adapter's own (unfinished, ...).

    ``tir/ts`` is the episode's Tool Selection where defined and 0 elsewhere, with
    ``tir/ts_defined`` 1 where defined: over a batch, TS = mean(ts) / mean(ts_defined).
    """
    counts = trajectory.tool_counts()
    statuses = [r.get("status") for t in trajectory.turns for r in t.tool_results]
    ts = tool_selection(trajectory, task)
    logs = {
        "correct": _flag(trajectory.correct),
        "answered": _flag(trajectory.answered),
        "infra_failed": float(trajectory.infra_failed),
        "turns": float(len(trajectory.turns)),
        "tool_calls": float(trajectory.num_tool_calls),
        "parse_errors": float(trajectory.num_parse_errors),
        "ts": 0.0 if ts is None else ts,
        "ts_defined": float(ts is not None),
    }
    for name in sorted(tool_names):
        logs[f"tool_calls/{name}"] = float(counts.get(name, 0))
    for status in Status:
        logs[f"status/{status.value}"] = float(statuses.count(status.value))
    logs.update({k: float(v) for k, v in flags.items()})
    return {PREFIX + k: v for k, v in logs.items()}


def ledger_flags(trajectory: Trajectory) -> dict[str, float]:
    """The flags every adapter reports with an episode: ``unfinished`` (the env did not end it:
    a failure, timeout or policy error stopped it, ``Trajectory.failure``), ``drift`` (ids that
    differ from a fresh encoding of the text, ``Trajectory.drift``), ``retokenized`` (some
    action arrived as text)."""
    stopped = trajectory.failure is not None
    return {"unfinished": float(stopped or not (trajectory.terminated or trajectory.truncated)),
            "drift": float(trajectory.drift), "retokenized": float(trajectory.retokenized)}


def turn_rewards(trajectory: Trajectory) -> list[float]:
    """Each turn's whole reward: what the ledger credits on that turn's action tokens (the
    turn's own reward, and on the last turn the outcome too), so the list sums to the
    episode's reward.  ``Turn.reward`` alone leaves the outcome out."""
    rewards = trajectory.token_rewards
    return [float(sum(rewards[a:b])) for a, b in (t.action_span for t in trajectory.turns)]


def policy_end(loss_mask: Sequence[int]) -> int:
    """One past the last policy token (0 when the policy sampled nothing): where a trainer
    that writes the episode's reward on its last response token must end the response."""
    for i in range(len(loss_mask) - 1, -1, -1):
        if loss_mask[i]:
            return i + 1
    return 0
