"""``AgentSource``: a user's agent program as a rollout source for every trainer.

The agent is ``async def agent(task, base_url, api_key) -> answer | None``: any program that
talks to a chat API (the ``openai`` or ``anthropic`` SDK, the Agents SDK, LangGraph, a CLI
harness in a subprocess).  For each task the source opens an episode on the gateway, runs the
agent against it (at most ``concurrency`` at once, each within ``timeout_s``), finishes the
episode (the host's reward) and yields its ``EpisodeResult``.  An agent that raises or runs out
of time leaves its ledger as far as it got, each segment flagged ``infra_failed`` with the
cause (``Trajectory.fail``), so trainers drop it instead of scoring a crash 0.

``groups(tasks, samples_per_task)`` is what the GRPO trainer and the OpenRLHF/verl/TRL
adapters consume from ``collect``: per task, the trajectories of its ``samples_per_task``
episodes (every trainable segment, each carrying its episode's reward).
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence

from tir_envs.gateway.episode import EpisodeResult
from tir_envs.trajectory import EpisodeFailure, Trajectory

Agent = Callable[[Any, str, str], Awaitable[Any]]


class AgentSource:
    """Runs ``agent`` on tasks through ``gateway`` (see the module docstring)."""

    def __init__(self, gateway: Any, agent: Agent, *, concurrency: int = 64,
                 timeout_s: float | None = None):
        if not callable(agent):
            raise TypeError("agent must be async def agent(task, base_url, api_key) -> "
                            f"answer | None, got {type(agent).__name__}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.gateway = gateway
        self.agent = agent
        self.concurrency = concurrency
        self.timeout_s = timeout_s

    async def episode(self, task: Any) -> EpisodeResult:
        """One agent run on ``task``, finished and scored."""
        opened = self.gateway.open_episode(task)  # a GatewayPool's is a coroutine
        base_url, key = await opened if inspect.isawaitable(opened) else opened
        answer, failure = None, None
        try:
            async with asyncio.timeout(self.timeout_s):
                answer = await self.agent(task, base_url, key)
        except TimeoutError:
            failure = EpisodeFailure("timeout", f"the agent ran past {self.timeout_s} s")
        except Exception as exc:  # noqa: BLE001 - the agent's own failure, kept as a record
            failure = EpisodeFailure("infra", f"the agent raised {type(exc).__name__}: {exc}")
        result = await self.gateway.finish(key, agent_answer=answer,
                                           error=failure.message if failure else None)
        if failure is not None:
            for traj in result.trajectories:
                traj.fail(failure)
        return result

    async def run(self, tasks: Sequence[Any]) -> AsyncIterator[EpisodeResult]:
        """Every task's episode, yielded as each finishes."""
        gate = asyncio.Semaphore(self.concurrency)

        async def one(task: Any) -> EpisodeResult:
            async with gate:
                return await self.episode(task)
        pending = [asyncio.ensure_future(one(t)) for t in tasks]
        try:
            for done in asyncio.as_completed(pending):
                yield await done
        finally:
            for p in pending:
                p.cancel()

    async def collect(self, tasks: Sequence[Any]) -> list[EpisodeResult]:
        """Every task's episode, in task order."""
        gate = asyncio.Semaphore(self.concurrency)

        async def one(task: Any) -> EpisodeResult:
            async with gate:
                return await self.episode(task)
        return list(await asyncio.gather(*(one(t) for t in tasks)))

    async def groups(self, tasks: Sequence[Any],
                     samples_per_task: int) -> list[list[Trajectory]]:
        """Per task, the trajectories of ``samples_per_task`` episodes (GRPO groups)."""
        if samples_per_task < 1:
            raise ValueError(f"samples_per_task must be >= 1, got {samples_per_task}")
        flat = [t for t in tasks for _ in range(samples_per_task)]
        results = await self.collect(flat)
        return [[traj for r in results[i:i + samples_per_task] for traj in r.trajectories]
                for i in range(0, len(results), samples_per_task)]
