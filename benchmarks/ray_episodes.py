"""A benchmark's episodes across a Ray cluster's workers (``--ray [ADDRESS]``).

The driver keeps everything that makes a run a run: the folder, its lock, ``run.json``, the
plan of samples still to run, and ``samples.jsonl``, to which it appends each sample as it
comes back, so a Ray run is resumable exactly like a local one and ends in the same
``summary.json``.  The workers hold what an episode needs: one ``EpisodeWorker`` actor per CPU
of the cluster, each with its own ``EpisodeRunner`` (envs and their tools: the Python sandbox,
the search index, the databases live on the worker's node) and its own policy built from the
run's spec string (``openai:URL1,URL2`` reaches the model wherever it is served: one vLLM
server per node; ``hf:``/``vllm:`` load a copy per worker; ``scripted:``, ``oracle``,
``wrong``).  A policy *object* cannot travel: Ray runs take spec strings.

Each sample's ``Job`` travels to the worker and its trajectory comes back to the driver, which
hands both to the harness (the executor seam, ``tir_envs.bench.execution``) to build the record
with the same code as a local run, so the records equal a
single-process run's sample for sample (wall times aside).  A worker that dies loses only its
samples in flight: they are recorded as infrastructure failures and retried by a rerun.
"""

from __future__ import annotations

import dataclasses
import math
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from tir_envs.rollout.policy import SamplingParams

from tir_envs.bench.jobs import Job, JobPolicy, OnSample

if TYPE_CHECKING:
    from tir_envs.bench.config import RunConfig
    from tir_envs.bench.suites import Suite

REPO = str(Path(__file__).resolve().parents[1])


def connect(address: str | None) -> Any:
    """The ``ray`` module, connected: to ``address`` (``auto``: the cluster this machine is
    part of), or a fresh local instance when ``address`` is ``None`` or ``"local"``; an
    instance this process already started is used as it is."""
    try:
        import ray
    except ImportError as exc:
        raise ImportError("--ray needs Ray: pip install 'tir-envs[ray]'") from exc
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"runtime_env": {"env_vars": {"PYTHONPATH": REPO}},
                                  "log_to_driver": False}
        if address not in (None, "", "local"):
            kwargs["address"] = address
        else:  # a new instance: never a cluster another process on this machine started
            kwargs.update(address="local", include_dashboard=False)
        ray.init(**kwargs)
    return ray


class EpisodeWorker:
    """One worker's envs and policy; ``run`` plays one ``Job`` and returns its trajectory as a
    dict (made a Ray actor by ``RayEpisodes``)."""

    def __init__(self, suite_name: str, config: Mapping[str, Any], env_kwargs: dict[str, Any],
                 policy: Mapping[str, Any], sampling: SamplingParams, limit: int | None):
        from tir_envs.rollout.runner import EpisodeRunner

        from tir_envs.registry import import_modules

        from tir_envs.chat.served import served_prompt

        from tir_envs.bench.policies import resolve_policy
        from tir_envs.bench.suites import register, suite_of_run

        import_modules(config.get("imports", ()), "imports=")  # the user's env ids, here too
        self.suite = suite_of_run(suite_name, config)
        if suite_name.startswith("custom:"):
            register(self.suite)  # item-scripted policies look their suite up by name
        self.policy, tok, _, _ = resolve_policy(policy["spec"], policy.get("tokenizer"),
                                                policy.get("model"), policy.get("api_key"),
                                                policy.get("engine_args"))
        kwargs = dict(env_kwargs)
        if tok is not None:
            kwargs.setdefault("tokenizer", tok)
        kwargs["tasks"] = [task for _, task in self.suite.items(limit)]
        self.sampling = sampling
        self.name = f"{socket.gethostname()}:{os.getpid()}"  # in each trajectory's metadata
        self.runner = EpisodeRunner(self.suite.env_id, env_kwargs=kwargs,
                                    episode_timeout_s=config.get("episode_timeout_s"),
                                    prompt_view=served_prompt if config.get("as_served")
                                    else None)

    async def run(self, job: Job) -> dict[str, Any]:
        traj = await self.runner.run(
            JobPolicy(self.policy, job, self.runner.first_env.unwrapped.protocol),
            options={"task": job.task},
            sampling=dataclasses.replace(self.sampling, seed=job.seed),
            tags={"item": job.item, "sample": job.sample, "worker": self.name})
        return traj.to_dict()


@dataclass
class RayEpisodes:
    """The executor of a Ray run (``tir_envs.bench.execution``): the connected ``ray`` module, the
    run's ``run.json`` record and what every worker needs to rebuild the policy."""

    ray: Any
    record: Mapping[str, Any]
    limit: int | None
    policy: Mapping[str, Any]
    concurrency: int

    @classmethod
    def connect(cls, config: RunConfig, record: Mapping[str, Any]) -> "RayEpisodes":
        """Connected to ``config.ray`` (``True``/``"local"``: a local instance)."""
        policy = {"spec": config.policy, "tokenizer": config.tokenizer, "model": config.model,
                  "api_key": config.api_key, "engine_args": dict(config.engine_args)}
        return cls(connect(None if config.ray is True else config.ray), record, config.limit,
                   policy, config.concurrency)

    def __call__(self, suite: Suite, jobs: Sequence[Job], env_kwargs: dict[str, Any],
                 sampling: SamplingParams, on_sample: OnSample) -> None:
        """Play ``jobs`` on one actor per cluster CPU, ``concurrency`` in flight over all of
        them, handing each finished job and trajectory to ``on_sample`` on the driver."""
        from tir_envs.trajectory import EpisodeFailure, Trajectory

        ray = self.ray
        workers_n = max(1, min(len(jobs), int(ray.cluster_resources().get("CPU", 1))))
        per_worker = max(1, math.ceil(self.concurrency / workers_n))
        actor = ray.remote(num_cpus=1)(EpisodeWorker)
        env_kwargs = {k: v for k, v in env_kwargs.items() if k not in ("tokenizer", "tasks")}
        workers = [actor.options(max_concurrency=per_worker).remote(
            suite.name, dict(self.record), env_kwargs, dict(self.policy), sampling, self.limit)
            for _ in range(workers_n)]
        todo = list(jobs)[::-1]
        in_flight: dict[Any, tuple[Job, int]] = {}

        def submit(w: int) -> None:
            job = todo.pop()
            in_flight[workers[w].run.remote(job)] = (job, w)

        try:
            for w in range(workers_n):
                for _ in range(per_worker):
                    if todo:
                        submit(w)
            while in_flight:
                ready, _ = ray.wait(list(in_flight), num_returns=1)
                job, w = in_flight.pop(ready[0])
                try:
                    traj = Trajectory.from_dict(ray.get(ready[0]))
                except Exception as exc:  # noqa: BLE001 - a worker lost: the sample is retried
                    traj = Trajectory(task_id=job.task.id, infra_failed=True,
                                      stop_reason="error",
                                      failure=EpisodeFailure("infra",
                                                             f"Ray worker: {exc}"[:2000]),
                                      metadata={"item": job.item, "sample": job.sample})
                on_sample(job, traj)
                if todo:
                    submit(w)
        finally:
            for ref in in_flight:
                ray.cancel(ref, force=True)
            for w in workers:
                ray.kill(w)
