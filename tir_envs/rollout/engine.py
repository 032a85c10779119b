"""The rollout engine: drive many episodes of a ``tir/*`` env against a policy.

``collect`` (and its async twin ``acollect``) runs ``samples_per_task`` episodes of every task
and returns their trajectories, ready for a trainer or a benchmark.

Two schedules:
  * ``mode="async"`` (default): every episode advances on its own.  Its tool call starts the
    moment its action is generated and its next generation the moment the observation is back,
    never waiting for the rest of the batch; a finished episode's slot takes the next job at once.
  * ``mode="sync"``: the baseline most RL frameworks started from.  Episodes run in batches of
    ``max_concurrency``: all actions of the batch are generated, then all tool calls run, then
    the next turn, and the next batch starts when the slowest episode of this one ends.

Each episode runs through ``EpisodeRunner`` (``tir_envs.rollout.runner``): the one loop, env
pool and failure record of the project.  Each generation asks for what the env's latest
``GenerationLimits`` say, read through any Gymnasium wrappers around the env (``async_env``).

Failures never stop a run.  An episode that runs past ``episode_timeout_s``, whose policy fails
(a server timed out or went away) or whose env raises is kept, flagged ``infra_failed`` with
``trajectory.failure`` (kind ``timeout``, ``policy_error`` or ``infra``), so a trainer can drop
it (its reward is not silently 0).  A policy whose vocabulary differs from the env's tokenizer
is refused before the first episode.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Callable, Collection, Iterable, Mapping, Sequence

import gymnasium as gym

from tir_envs.rollout.policy import Policy, SamplingParams
from tir_envs.rollout.runner import EnvSpec, EpisodeRunner, Lockstep
from tir_envs.status import Status
from tir_envs.task import Task
from tir_envs.trajectory import Trajectory
from tir_envs.validation import check_positive_int, check_positive_number

log = logging.getLogger(__name__)

MODES = ("async", "sync")


@dataclass
class RolloutStats:
    """Live counts of a run (shown on the progress bar, returned with the trajectories)."""

    episodes: int = 0
    total: int = 0
    tool_calls: int = 0        # calls a tool executed
    tool_errors: int = 0       # executed calls whose status was not ok (model errors and infra)
    parse_errors: int = 0      # calls the env could not parse (never executed)
    infra_failed: int = 0      # episodes flagged for a trainer to drop
    timeouts: int = 0          # episodes stopped by episode_timeout_s
    policy_errors: int = 0     # episodes stopped because the policy failed to generate
    errors: int = 0            # episodes stopped by an exception from the env (infra)
    policy_tokens: int = 0
    elapsed_s: float = 0.0

    @property
    def episodes_per_s(self) -> float:
        return self.episodes / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def postfix(self) -> dict[str, Any]:
        return {"ep/s": f"{self.episodes_per_s:.2f}", "tools": self.tool_calls,
                "tool_err": self.tool_errors, "parse_err": self.parse_errors,
                "infra": self.infra_failed, "timeout": self.timeouts,
                "policy_err": self.policy_errors}

    def count(self, traj: Trajectory) -> None:
        """Add a finished episode's tool calls (executed ones only) and parse errors."""
        records = [r for turn in traj.turns for r in turn.tool_results]
        self.tool_calls += traj.num_tool_calls
        self.tool_errors += sum(bool(r.get("executed")) and Status(r.get("status", "ok")).failed
                                for r in records)
        self.parse_errors += traj.num_parse_errors

    def finished(self, traj: Trajectory, elapsed_s: float) -> None:
        """Count a finished episode (and its failure, if it had one)."""
        self.episodes += 1
        self.count(traj)
        self.infra_failed += bool(traj.infra_failed)
        self.policy_tokens += traj.num_policy_tokens
        self.elapsed_s = elapsed_s
        kind = traj.failure.kind if traj.failure is not None else None
        if kind == "timeout":
            self.timeouts += 1
        elif kind == "policy_error":
            self.policy_errors += 1
        elif kind == "infra":
            self.errors += 1
        if kind in ("policy_error", "infra") and self.errors + self.policy_errors == 1:
            log.warning("rollout episode failed (kept, flagged infra_failed): %s",
                        traj.failure.message)

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "episodes_per_s": self.episodes_per_s}


class Rollouts(list):
    """The trajectories of a run, in job order (task by task, ``samples_per_task`` each), with
    the run's ``stats``.  ``groups()`` gives one list per task, as GRPO consumes them."""

    def __init__(self, items: Iterable[Trajectory] = (), stats: RolloutStats | None = None,
                 samples_per_task: int = 1):
        super().__init__(items)
        self.stats = stats or RolloutStats()
        self.samples_per_task = samples_per_task

    def groups(self) -> list[list[Trajectory]]:
        g = self.samples_per_task
        return [list(self[i:i + g]) for i in range(0, len(self), g)]


@dataclass(frozen=True)
class EpisodeJob:
    """One episode of a run: the env's reset ``options`` and ``seed``, the ``sampling`` it is
    generated with (used as given, seed included), ``tags`` for its metadata, the ``policy``
    to generate with when not the run's (e.g. one told which job it serves), and ``key``, the
    caller's own handle on the job (a benchmark's sample), handed back by ``arun``'s
    ``on_done`` with the trajectory."""

    options: dict[str, Any]
    seed: int | None = None
    sampling: SamplingParams | None = None
    tags: Mapping[str, Any] = field(default_factory=dict)
    policy: Policy | None = None
    key: Any = None


async def _run_async(jobs: Sequence[EpisodeJob], runner: EpisodeRunner, policy: Policy | None,
                     width: int, done: Callable[[int, Trajectory], None]) -> None:
    """Each of ``width`` slots takes the next job the moment its episode ends."""
    queue = deque(enumerate(jobs))

    async def slot() -> None:
        while queue:
            i, job = queue.popleft()
            done(i, await _run_job(runner, policy, job))

    await asyncio.gather(*(slot() for _ in range(width)))


async def _run_sync(jobs: Sequence[EpisodeJob], runner: EpisodeRunner, policy: Policy | None,
                    width: int, done: Callable[[int, Trajectory], None]) -> None:
    """Batches of ``width`` episodes in lockstep: every phase of the batch ends before the
    next starts, and the next batch starts when the slowest episode of this one ends."""
    for start in range(0, len(jobs), width):
        batch = list(enumerate(jobs))[start:start + width]
        lockstep = Lockstep(len(batch))
        trajs = await asyncio.gather(*(_run_job(runner, policy, job, lockstep)
                                       for _, job in batch))
        for (i, _), traj in zip(batch, trajs):
            done(i, traj)


def _run_job(runner: EpisodeRunner, policy: Policy | None, job: EpisodeJob,
             lockstep: Lockstep | None = None):
    return runner.run(job.policy or policy, options=job.options, seed=job.seed,
                      sampling=job.sampling, tags=job.tags, lockstep=lockstep)


# ---------------------------------------------------------------------- inputs


def _task_options(tasks: Sequence[Any] | int | None, first_env: gym.Env) -> list[dict[str, Any]]:
    """One reset ``options`` dict per task: ``{"task": Task}`` or ``{"index": i}``."""
    if tasks is None or isinstance(tasks, int):
        own = len(getattr(first_env.unwrapped, "tasks", []) or [])
        if own == 0:
            raise ValueError("tasks=None/int uses the env's own tasks, but this env has none; "
                             "pass tasks=[...] (Task objects, dicts with 'question', or strings)")
        n = own if tasks is None else tasks
        if isinstance(tasks, int) and not 1 <= tasks <= own:
            raise ValueError(f"tasks={tasks} must lie in 1..{own} (the env's own task count)")
        return [{"index": i} for i in range(n)]
    if isinstance(tasks, (str, bytes, dict)) or not isinstance(tasks, Sequence):
        raise TypeError("tasks must be a list of tasks, an int (the first N of the env's own "
                        f"tasks) or None (all of them); got {type(tasks).__name__}")
    if not tasks:
        raise ValueError("tasks is empty: pass at least one task")
    return [{"task": Task.coerce(t, i)} for i, t in enumerate(tasks)]


def _per_task_policies(policy: Any, options: Sequence[dict[str, Any]],
                       first_env: gym.Env) -> list[Any] | None:
    """One policy per task for a policy that answers per task (``for_task``: the gold
    policies of ``tir_envs.rollout.gold``); ``None`` for an ordinary policy."""
    for_task = getattr(policy, "for_task", None)
    if for_task is None:
        return None
    env = first_env.unwrapped
    return [for_task(o["task"] if "task" in o else env.tasks[o["index"]], env) for o in options]


def _check_args(samples_per_task: int, max_concurrency: int, episode_timeout_s: float | None,
                mode: str) -> None:
    check_positive_int(samples_per_task=samples_per_task, max_concurrency=max_concurrency)
    check_positive_number(episode_timeout_s=episode_timeout_s, unit="seconds", allow_none=True)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


# ---------------------------------------------------------------------- entry points
async def acollect(env: EnvSpec | EpisodeRunner, policy: Policy,
                   tasks: Sequence[Any] | int | None = None, *,
                   samples_per_task: int = 1, max_concurrency: int = 32,
                   sampling: SamplingParams | None = None, episode_timeout_s: float | None = None,
                   out: str | Path | IO[str] | None = None, progress: bool = True,
                   mode: str = "async", env_kwargs: dict[str, Any] | None = None,
                   seed: int | None = None,
                   on_trajectory: Callable[[Trajectory], None] | None = None,
                   skip: Collection[tuple[int, int]] = ()) -> Rollouts:
    """Async twin of ``collect`` (same arguments), for callers already inside an event loop."""
    _check_args(samples_per_task, max_concurrency, episode_timeout_s, mode)
    runner, owned = _runner(env, env_kwargs, episode_timeout_s)
    try:
        runner.check_policy(policy)
        options = _task_options(tasks, runner.first_env)
        base = sampling or SamplingParams()
        per_task = _per_task_policies(policy, options, runner.first_env)
        jobs = [EpisodeJob(options[i // samples_per_task],
                           None if seed is None else seed + i,
                           base if base.seed is None else replace(base, seed=base.seed + i),
                           {"group": i // samples_per_task, "sample": i % samples_per_task},
                           per_task[i // samples_per_task] if per_task else None)
                for i in range(len(options) * samples_per_task)
                if (i // samples_per_task, i % samples_per_task) not in skip]
        rollouts = await arun(runner, policy, jobs, max_concurrency=max_concurrency, mode=mode,
                              out=out, progress=progress, on_trajectory=on_trajectory,
                              name=env if isinstance(env, str) else None)
        rollouts.samples_per_task = samples_per_task
        return rollouts
    finally:
        if owned:
            await runner.aclose()


def _runner(env: EnvSpec | EpisodeRunner, env_kwargs: dict[str, Any] | None,
            episode_timeout_s: float | None) -> tuple[EpisodeRunner, bool]:
    """The caller's runner (left open), or one made for this call (closed at its end)."""
    if not isinstance(env, EpisodeRunner):
        return EpisodeRunner(env, env_kwargs=env_kwargs, episode_timeout_s=episode_timeout_s), True
    if env_kwargs or episode_timeout_s is not None:
        raise ValueError("env_kwargs/episode_timeout_s belong to the EpisodeRunner passed as "
                         "env: set them when making it")
    return env, False


async def arun(runner: EpisodeRunner, policy: Policy | None, jobs: Sequence[EpisodeJob], *,
               max_concurrency: int = 32, mode: str = "async",
               out: str | Path | IO[str] | None = None, progress: bool = True,
               on_trajectory: Callable[[Trajectory], None] | None = None,
               name: str | None = None,
               on_done: Callable[[EpisodeJob, Trajectory], None] | None = None) -> Rollouts:
    """Run ``jobs`` through ``runner`` on one schedule; the trajectories in job order.

    What ``acollect`` does once it has made its jobs; a caller with its own per-episode
    seeds, sampling or policies (the benchmark harness) makes the jobs itself.  ``policy``:
    the policy of every job that names none (``None``: each job names its own).
    ``on_done(job, trajectory)``: like ``on_trajectory``, with the job it played."""
    _check_args(1, max_concurrency, None, mode)
    if policy is None and any(job.policy is None for job in jobs):
        raise ValueError("arun: policy=None needs every EpisodeJob to name its policy")
    from tqdm.auto import tqdm

    stats = RolloutStats(total=len(jobs))
    name = name or getattr(runner.first_env.unwrapped, "env_id", "env")
    bar = tqdm(total=len(jobs), desc=f"rollout {name} ({mode})", unit="ep",
               disable=not progress, dynamic_ncols=True)
    sink, owned = _open_sink(out)
    results: list[Trajectory | None] = [None] * len(jobs)
    started = time.perf_counter()

    def done(i: int, traj: Trajectory) -> None:
        results[i] = traj
        stats.finished(traj, time.perf_counter() - started)
        if sink is not None:
            sink.write(traj.to_json() + "\n")
            sink.flush()
        if on_trajectory is not None:
            on_trajectory(traj)
        if on_done is not None:
            on_done(jobs[i], traj)
        bar.set_postfix(stats.postfix(), refresh=False)
        bar.update(1)

    limit = max_concurrency if runner.capacity is None else min(max_concurrency,
                                                                runner.capacity)
    width = max(1, min(limit, len(jobs)))
    if jobs:  # envs made and a cold index or JVM loaded here, not in the episodes' latency
        await runner.warm_up(width)
    schedule = _run_async if mode == "async" else _run_sync
    try:
        await schedule(jobs, runner, policy, width, done)
    finally:
        bar.close()
        if owned:
            sink.close()
    stats.elapsed_s = time.perf_counter() - started
    return Rollouts(results, stats)


def _open_sink(out: str | Path | IO[str] | None) -> tuple[IO[str] | None, bool]:
    if out is None:
        return None, False
    if hasattr(out, "write"):
        return out, False  # type: ignore[return-value]
    path = Path(out)
    if path.parent and not path.parent.exists():
        raise FileNotFoundError(f"out={str(out)!r}: folder {str(path.parent)!r} does not exist")
    return open(path, "w", encoding="utf-8"), True


def collect(env: EnvSpec | EpisodeRunner, policy: Policy,
            tasks: Sequence[Any] | int | None = None, *,
            samples_per_task: int = 1, max_concurrency: int = 32,
            sampling: SamplingParams | None = None, episode_timeout_s: float | None = None,
            out: str | Path | IO[str] | None = None, progress: bool = True, mode: str = "async",
            env_kwargs: dict[str, Any] | None = None, seed: int | None = None,
            on_trajectory: Callable[[Trajectory], None] | None = None,
            skip: Collection[tuple[int, int]] = ()) -> Rollouts:
    """Run ``samples_per_task`` episodes of every task against ``policy``; return them all.

    Args:
      env: an env id (``"tir/MathCode-v0"``, created with ``tir_envs.make(id, **env_kwargs)``)
        or a factory returning a new env: one env is made per concurrent slot, reused across
        its episodes, and closed at the end.  Or a list of env instances, one per slot (at most
        ``len(env)`` episodes run at once), reused and left open for the next call.  Or an
        ``EpisodeRunner`` (its env pool and timeout), left open for the next call.
      policy: anything with ``async generate(prompt_ids, stop, sampling) -> Generation``
        (``tir_envs.rollout``: ``HFPolicy``, ``VLLMPolicy``, ``OpenAIPolicy``, ``ScriptedPolicy``).
      tasks: a list of tasks (``Task``, dicts with ``question``/``answer``, or strings), an int N
        (the env's own first N tasks) or ``None`` (all the env's own tasks).
      samples_per_task: G, episodes per task (GRPO groups); they run next to each other.
      max_concurrency: episodes in flight at once (async) or the batch size (sync).
      sampling: ``SamplingParams``; ``max_tokens`` is further capped per turn by the env's
        ``GenerationLimits``.  A ``seed`` is offset by the episode's index.
      episode_timeout_s: wall-clock limit per episode; past it the episode is kept, flagged
        ``infra_failed`` with ``stop_reason="timeout"``.  (A policy that fails, e.g. a server
        request that timed out, gives ``stop_reason="policy_error"`` instead.)
      out: a JSONL path (or open text file) each trajectory is written to as it finishes.
      progress: show a tqdm bar with episodes/s, tool calls, tool errors, infra failures.
      mode: ``"async"`` (each episode advances on its own) or ``"sync"`` (batch barriers).
      env_kwargs: keyword arguments for the env (id or factory).
      seed: reset seed of the first episode; episode ``i`` gets ``seed + i``.
      on_trajectory: called with each trajectory as it finishes (completion order).
      skip: ``(group, sample)`` pairs not to run (an interrupted run's finished episodes, when
        resuming it: every other episode keeps its seed and its ``group``/``sample`` tags).

    Returns ``Rollouts``: a list of trajectories in job order (task by task, G each; see
    ``metadata["group"]``/``["sample"]``) with ``.stats`` and ``.groups()``.  Must be called
    outside a running event loop; inside one, ``await acollect(...)``.  The policy's
    ``aclose()`` (if any) runs at the end, releasing what it bound to this call's event loop.
    """
    async def main() -> Rollouts:
        try:
            return await acollect(env, policy, tasks, samples_per_task=samples_per_task,
                                  max_concurrency=max_concurrency, sampling=sampling,
                                  episode_timeout_s=episode_timeout_s, out=out, progress=progress,
                                  mode=mode, env_kwargs=env_kwargs, seed=seed,
                                  on_trajectory=on_trajectory, skip=skip)
        finally:
            closer = getattr(policy, "aclose", None)
            if closer is not None:
                await closer()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    raise RuntimeError("collect() was called inside a running event loop; use "
                       "`await acollect(...)` there instead")
