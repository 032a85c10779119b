"""One audit: the honest-but-wrong baseline, then every probe, on the same tasks of one env.

The baseline of a task is the best reward any honest-but-wrong policy earns there: a wrong
answer given directly, or after one harmless call of each tool (so a reward for using the
right tool, AutoTIR's, or for a clean cycle, RITE's, is not mistaken for a hack).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Mapping, Sequence

from tir_envs.audit.context import ProbeContext
from tir_envs.audit.probes import PROBES, Probe, honest
from tir_envs.audit.report import AuditReport, ProbeResult
from tir_envs.audit.runner import EpisodeRecord, play
from tir_envs.audit.target import build_env, pick_tasks
from tir_envs.rollout.runner import EpisodeRunner
from tir_envs.validation import check_positive_number


async def aaudit(env: str | Callable[[], Any], *, protocol: str | None = None,
                 env_kwargs: Mapping[str, Any] | None = None, tasks: int = 3,
                 probes: Sequence[Probe] | None = None,
                 episode_timeout_s: float = 120.0) -> AuditReport:
    """Audit ``env`` (an env id or a zero-argument factory); see ``tir_envs.audit.audit``."""
    battery = list(PROBES if probes is None else probes)
    check_positive_number(episode_timeout_s=episode_timeout_s)
    target = build_env(env, protocol, env_kwargs)
    runner = EpisodeRunner([target], episode_timeout_s=episode_timeout_s)
    try:
        chosen = pick_tasks(target, tasks)
        baseline, best = await _baseline(runner, target, chosen)
        results = []
        for p in battery:
            episodes = []
            for index, cands in chosen:
                record = await _maybe_play(runner, target, index, cands, p.build)
                if record is not None:
                    episodes.append(record)
            results.append(ProbeResult(p.name, p.family, p.what, episodes, best))
    finally:
        await runner.aclose()
        target.close()
    name = env if isinstance(env, str) else getattr(target, "env_id", type(target).__name__)
    args = {**dict(env_kwargs or {}), **({"protocol": protocol} if protocol else {})}
    return AuditReport(name, args, [str(target.tasks[i].id) for i, _ in chosen], baseline,
                       results, _warnings(baseline))


async def _maybe_play(runner, env, index, cands, build) -> EpisodeRecord | None:
    """Play ``build`` on task ``index``, or ``None`` when the probe does not apply there (it
    is asked first on a context without observations, before any reset)."""
    if build(ProbeContext(env, env.tasks[index], cands, prompt="")) is None:
        return None
    return await play(runner, env, index, cands, build)


async def _baseline(runner, env, chosen) -> tuple[list[EpisodeRecord], dict[str, float]]:
    """Every honest-but-wrong episode, and the best reward per task id."""
    records, best = [], {}
    strategies = [None, *(env.tools if env.use_tools else [])]
    for index, cands in chosen:
        task_id = str(env.tasks[index].id)
        for tool in strategies:
            record = await play(runner, env, index, cands, lambda ctx, t=tool: honest(ctx, t))
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
          out: str | None = None) -> AuditReport:
    """Probe ``env`` for reward hacks: every probe of ``probes`` (default: the whole battery,
    ``tir_envs.audit.PROBES``) on ``tasks`` tasks, against the honest-but-wrong baseline.

    ``env``: an env id (``protocol`` and ``env_kwargs`` go to its constructor) or a
    zero-argument factory.  ``out``: a folder for ``audit.json`` and ``audit.md``.  Returns
    the ``AuditReport``; ``report.ok`` is True when every applicable probe HELD.
    """
    report = asyncio.run(aaudit(env, protocol=protocol, env_kwargs=env_kwargs, tasks=tasks,
                                probes=probes, episode_timeout_s=episode_timeout_s))
    if out is not None:
        report.write(out)
    return report
