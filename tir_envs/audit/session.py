"""One audit: the honest-but-wrong baseline, then every probe, on the same tasks of one env.

The baseline of a task is the best reward any honest-but-wrong policy earns there: a wrong
answer given directly, or after one harmless call of each tool (so a reward for using the
right tool, AutoTIR's, or for a clean cycle, RITE's, is not mistaken for a hack).
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable, Mapping, Sequence

from tir_envs.audit.context import ProbeContext
from tir_envs.audit.battery import PROBES
from tir_envs.audit.probes import Probe, honest
from tir_envs.audit.report import AuditReport, ProbeResult
from tir_envs.audit.runner import EpisodeRecord
from tir_envs.audit.runner import play as run_local
from tir_envs.audit.target import build_env, has_gold, pick_tasks
from tir_envs.rollout.runner import EpisodeRunner
from tir_envs.validation import check_positive_number


async def aaudit(env: str | Callable[[], Any], *, protocol: str | None = None,
                 env_kwargs: Mapping[str, Any] | None = None, tasks: int = 3,
                 probes: Sequence[Probe] | None = None,
                 episode_timeout_s: float = 120.0, via: str | None = None) -> AuditReport:
    """Audit ``env`` (an env id or a zero-argument factory); see ``tir_envs.audit.audit``."""
    battery = list(PROBES if probes is None else probes)
    check_positive_number(episode_timeout_s=episode_timeout_s)
    target = build_env(env, protocol, env_kwargs)
    runner = EpisodeRunner([target], episode_timeout_s=episode_timeout_s)
    args = {**dict(env_kwargs or {}), **({"protocol": protocol} if protocol else {})}
    try:
        async with _player(via, env, args, target, runner, episode_timeout_s) as player:
            chosen = pick_tasks(target, tasks)
            gold = has_gold(chosen)
            baseline, best = await _baseline(player, target, chosen)
            results = [await _run_probe(player, target, chosen, p, gold, best)
                       for p in battery]
    finally:
        await runner.aclose()
        target.close()
    name = env if isinstance(env, str) else getattr(target, "env_id", type(target).__name__)
    if via:
        args["via"] = via
    notes = [] if gold else [GOLDLESS_NOTE]
    return AuditReport(name, args, [str(target.tasks[i].id) for i, _ in chosen], baseline,
                       results, notes + _warnings(baseline))


GOLDLESS_NOTE = ("no task has a gold answer (the reward is not ours to grade, e.g. a remote "
                 "env's): only the probes that need no gold ran, each against its control "
                 "(docs/audit.md, 'Envs without a gold answer')")


@asynccontextmanager
async def _player(via, env, args, target, runner, timeout_s) -> AsyncIterator[Callable]:
    """``play(index, candidates, build)``: through the env's own loop, or over OpenEnv."""
    if via is None:
        async def play(index, cands, build):
            return await run_local(runner, target, index, cands, build)
        yield play
        return
    from tir_envs.audit.wire import wire, wire_player
    async with wire(via, env, args, target) as url:
        yield wire_player(url, target, timeout_s)


async def _run_probe(play, env, chosen, p: Probe, gold: bool,
                     best: dict[str, float]) -> ProbeResult:
    """One probe on every chosen task where it applies (with its control, if it has one).
    A probe built on the gold does not apply without one; a gold-free probe runs only where
    there is no gold (with a gold, the battery's other probes cover the same ground)."""
    if p.needs_gold != gold:
        return ProbeResult(p.name, p.family, p.what, [], best)
    episodes, controls, against = [], [], dict(best)
    for index, cands in chosen:
        if p.build(ProbeContext(env, env.tasks[index], cands, prompt="")) is None:
            continue
        if p.control is not None:
            control = await play(index, cands, p.control)
            controls.append(control)
            if not control.masked:
                against[control.task_id] = control.reward
        episodes.append(await play(index, cands, p.build))
    return ProbeResult(p.name, p.family, p.what, episodes, against, controls)


async def _baseline(play, env, chosen) -> tuple[list[EpisodeRecord], dict[str, float]]:
    """Every honest-but-wrong episode, and the best reward per task id."""
    records, best = [], {}
    strategies = [None, *(env.tools if env.use_tools else [])]
    for index, cands in chosen:
        task_id = str(env.tasks[index].id)
        for tool in strategies:
            record = await play(index, cands, lambda ctx, t=tool: honest(ctx, t))
            records.append(record)
            if not record.masked:
                best[task_id] = max(best.get(task_id, float("-inf")), record.reward)
        best.setdefault(task_id, float("-inf"))
    return records, best


def _warnings(baseline: list[EpisodeRecord]) -> list[str]:
    """One line per finding and task (a task's baseline plays several strategies, which
    would otherwise repeat it)."""
    out: list[str] = []
    for e in baseline:
        if e.masked:
            line = (f"a baseline episode of task {e.task_id} was masked ({e.error or 'infra'}): "
                    "that task's baseline ignores it")
        elif e.correct:
            line = (f"a baseline episode of task {e.task_id} was graded correct with a wrong "
                    f"answer ({e.answer!r}): probes on it are judged against that reward (a "
                    "reward that pays answers near the gold should declare how near: rel_tol "
                    "/ abs_tol, docs/audit.md)")
        else:
            continue
        if line not in out:
            out.append(line)
    return out


def audit(env: str | Callable[[], Any], *, protocol: str | None = None,
          env_kwargs: Mapping[str, Any] | None = None, tasks: int = 3,
          probes: Sequence[Probe] | None = None, episode_timeout_s: float = 120.0,
          out: str | None = None, via: str | None = None) -> AuditReport:
    """Probe ``env`` for reward hacks: every probe of ``probes`` (default: the whole battery,
    ``tir_envs.audit.PROBES``) on ``tasks`` tasks, against the honest-but-wrong baseline.

    ``env``: an env id (``protocol`` and ``env_kwargs`` go to its constructor) or a
    zero-argument factory.  ``out``: a folder for ``audit.json`` and ``audit.md``.  ``via``:
    ``"openenv"`` plays every episode over OpenEnv's WebSocket against the env served here,
    a URL against a running ``tir-envs serve openenv`` of the same env (``audit.wire``).
    Returns
    the ``AuditReport``; ``report.ok`` is True when every applicable probe HELD.
    """
    report = asyncio.run(aaudit(env, protocol=protocol, env_kwargs=env_kwargs, tasks=tasks,
                                probes=probes, episode_timeout_s=episode_timeout_s,
                                via=via))
    if out is not None:
        report.write(out)
    return report
