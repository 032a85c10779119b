"""Benchmark an agent program: every sample is one run of the agent through the gateway.

``tir-envs bench --agent module:fn --policy SPEC ...``: the executor behind the harness's one
seam (``tir_envs.bench.execution``), so the plan, the records, resume, the summary and the report
are the harness's, exactly as for an env episode.  For each suite a ``Gateway`` serves the
policy; each job opens an episode on the suite's task, runs ``agent(task, base_url, api_key)``
(``concurrency`` at once, each within ``episode_timeout_s``) and is graded by the host with the
**suite env's own reward** (``tir_envs.gateway.rewards``: its answer reading and grader on the
policy's final completion, never on what the agent returns).

The sample's trajectory is the episode's last trainable segment (where the final answer was
written), with the episode's prefix breaks in ``metadata["gateway"]``.  An agent that raises or
times out gives an ``infra_failed`` sample (retried by a rerun, like any failed sample).
Sampling is the run's for every call of every episode; a per-sample seed does not reach the
policy (the gateway's settings are per run), which the record states.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from typing import Any, Callable, Sequence

from tir_envs.rollout.policy import SamplingParams
from tir_envs.trajectory import EpisodeFailure, Trajectory

from tir_envs.bench.jobs import Job, OnSample
from tir_envs.bench.suites import Suite

#: per-turn cap when the run sets none: a gateway has no env budget to cap each turn with
DEFAULT_AGENT_MAX_TOKENS = 4096


def load_agent(spec: Any) -> Callable[..., Any]:
    """An agent function from ``module:function`` (or the function itself), checked before any
    work: ``async def agent(task, base_url, api_key) -> answer | None``."""
    if callable(spec):
        fn = spec
    else:
        module, _, name = str(spec).partition(":")
        if not module or not name:
            raise ValueError(f"--agent must be module:function (an async def agent(task, "
                             f"base_url, api_key)), got {spec!r}")
        try:
            fn = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"--agent {spec}: cannot load it ({exc}); the module must be "
                             "importable from the working directory") from None
    if not inspect.iscoroutinefunction(fn) and not inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)):
        raise TypeError(f"--agent {spec}: must be an async function (async def agent(task, "
                        "base_url, api_key)), got a plain callable")
    return fn


def agent_name(spec: Any) -> str:
    return spec if isinstance(spec, str) else \
        f"{getattr(spec, '__module__', '?')}:{getattr(spec, '__qualname__', type(spec).__name__)}"


class AgentEpisodes:
    """The executor of an agent run (module docstring)."""

    def __init__(self, agent: Any, policy: Any, tokenizer: Any, concurrency: int,
                 episode_timeout_s: float | None, renderer: Any = None):
        self.agent = load_agent(agent)
        self.policy, self.tokenizer, self.renderer = policy, tokenizer, renderer
        self.concurrency, self.episode_timeout_s = concurrency, episode_timeout_s

    def __call__(self, suite: Suite, jobs: Sequence[Job], env_kwargs: dict[str, Any],
                 sampling: SamplingParams, on_sample: OnSample) -> None:
        asyncio.run(self._play(suite, jobs, env_kwargs, sampling, on_sample))

    async def _play(self, suite: Suite, jobs: Sequence[Job], env_kwargs: dict[str, Any],
                    sampling: SamplingParams, on_sample: OnSample) -> None:
        from tir_envs.gateway import AgentSource, Gateway
        from tir_envs.registry import make

        env = make(suite.env_id, **env_kwargs)
        try:
            core = env.unwrapped
            reward, protocol = core.reward, core.protocol
            tok = self.tokenizer or core.tokenizer
            cap = sampling.max_tokens if sampling.max_tokens < (1 << 30) else min(
                DEFAULT_AGENT_MAX_TOKENS, int(getattr(core, "max_total_tokens", 0) or
                                              DEFAULT_AGENT_MAX_TOKENS))
        finally:
            env.close()
        gateway = Gateway(self.policy, tokenizer=tok, renderer=self.renderer, reward=reward,
                          protocol=protocol,
                          sampling=SamplingParams(max_tokens=cap, temperature=sampling.temperature,
                                                  top_p=sampling.top_p, top_k=sampling.top_k))
        source = AgentSource(gateway, self.agent, concurrency=self.concurrency,
                             timeout_s=self.episode_timeout_s)
        gate = asyncio.Semaphore(self.concurrency)

        async def one(job: Job) -> None:
            async with gate:
                loop = asyncio.get_running_loop()
                t0 = loop.time()
                result = await source.episode(job.task)
                on_sample(job, sample_trajectory(result, job, loop.time() - t0))
        async with gateway:
            await asyncio.gather(*(one(j) for j in jobs))


def sample_trajectory(result: Any, job: Job, seconds: float) -> Trajectory:
    """The sample's trajectory: the episode's last segment (an empty, failed one when the
    agent never reached the policy), with the episode's gateway figures."""
    if result.trajectories:
        traj = result.trajectories[-1]
    else:
        traj = Trajectory(prompt_ids=[], task_id=str(job.task.id))
        traj.fail(EpisodeFailure("infra", result.error or "the agent made no model call"))
    if result.error and not traj.infra_failed:
        traj.fail(EpisodeFailure("infra", result.error))
    traj.metadata.update({"episode_s": seconds, "item": job.item, "sample": job.sample,
                          "gateway": {"episode": result.key_id, "calls": result.calls,
                                      "segments": len(result.trajectories),
                                      "breaks": result.breaks,
                                      "overrides": dict(result.overrides),
                                      "agent_answer": None if result.agent_answer is None
                                      else str(result.agent_answer)[:2000]}})
    return traj
