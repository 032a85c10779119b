"""Where a run's episodes are played: the one seam between the harness and its executors.

An executor is called with a suite, the ``Job``s still to run, the env's keyword arguments and
the sampling, and hands each finished ``(job, trajectory)`` to ``on_sample`` as it comes; the
harness does everything else (the folder, the records, the progress bar) the same way for
all of them.  ``LocalEpisodes`` plays them in this process through one ``EpisodeRunner``;
``tir_envs.bench.ray_episodes.RayEpisodes`` on a Ray cluster's workers.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, Protocol, Sequence

from tir_envs.chat.served import check_servable, served_prompt
from tir_envs.rollout.policy import SamplingParams

from tir_envs.bench.config import RunConfig
from tir_envs.bench.jobs import Job, JobPolicy, OnSample
from tir_envs.bench.suites import Suite


class Episodes(Protocol):
    """An executor (module docstring)."""

    def __call__(self, suite: Suite, jobs: Sequence[Job], env_kwargs: dict[str, Any],
                 sampling: SamplingParams, on_sample: OnSample) -> None: ...


class LocalEpisodes:
    """Every job as one ``EpisodeRunner`` episode in this process: its task, its own seed, the
    policy told its job; ``concurrency`` in flight."""

    def __init__(self, policy: Any, concurrency: int, episode_timeout_s: float | None,
                 as_served: bool = False):
        self.policy, self.concurrency = policy, concurrency
        self.episode_timeout_s = episode_timeout_s
        self.as_served = as_served

    def __call__(self, suite: Suite, jobs: Sequence[Job], env_kwargs: dict[str, Any],
                 sampling: SamplingParams, on_sample: OnSample) -> None:
        asyncio.run(self._play(suite, jobs, env_kwargs, sampling, on_sample))

    async def _play(self, suite: Suite, jobs: Sequence[Job], env_kwargs: dict[str, Any],
                    sampling: SamplingParams, on_sample: OnSample) -> None:
        from tir_envs.rollout.engine import EpisodeJob, arun
        from tir_envs.rollout.runner import EpisodeRunner, check_vocab

        runner = EpisodeRunner(suite.env_id, env_kwargs=env_kwargs,
                               episode_timeout_s=self.episode_timeout_s,
                               prompt_view=served_prompt if self.as_served else None)
        try:
            protocol = runner.first_env.unwrapped.protocol
            episodes = [EpisodeJob({"task": j.task},
                                   sampling=dataclasses.replace(sampling, seed=j.seed),
                                   tags={"item": j.item, "sample": j.sample},
                                   policy=JobPolicy(self.policy, j, protocol), key=j)
                        for j in jobs]
            check_vocab(self.policy, runner.first_env)
            if self.as_served:
                check_servable(runner.first_env.unwrapped)
            await arun(runner, None, episodes, max_concurrency=self.concurrency,
                       progress=False, on_done=lambda ej, traj: on_sample(ej.key, traj),
                       name=suite.name)
        finally:
            await runner.aclose()
            closer = getattr(self.policy, "aclose", None)  # what it bound to this loop
            if closer is not None:
                await closer()


def executor(config: RunConfig, policy: Any, record: dict[str, Any],
             tokenizer: Any = None) -> Episodes:
    """The executor ``config`` asks for: an agent program through the gateway when
    ``config.agent`` is set (``tir_envs.bench.agent_episodes``); on Ray when ``config.ray`` is set
    (the policy is then rebuilt on every worker from its spec); else in this process with
    ``policy``."""
    if config.agent is not None:
        from tir_envs.bench.agent_episodes import AgentEpisodes
        return AgentEpisodes(config.agent, policy, tokenizer, config.concurrency,
                             config.episode_timeout_s)
    if config.ray:
        from tir_envs.bench.ray_episodes import RayEpisodes
        return RayEpisodes.connect(config, record)
    return LocalEpisodes(policy, config.concurrency, config.episode_timeout_s, config.as_served)
