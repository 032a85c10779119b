"""``GatewayPool``: episodes on disjoint worker processes, ledgers back to the host, rewards
scored there; the same results a single gateway gives."""

from __future__ import annotations

import asyncio
import functools

import aiohttp

from tests.gateway_agents import chat_agent
from tests.gateway_helpers import ANSWER, tool_loop_policy
from tir_envs.gateway import AgentSource, GatewayPool
from tir_envs.task import Task


def test_pool_routes_each_episode_to_its_worker_and_returns_its_ledger():
    def reward(task, conversation):  # host-side: never pickled, never run in a worker
        return 1.0 if conversation and "\\boxed{42}" in conversation[-1]["content"] else 0.0

    async def agent(task, base_url, key):
        return await chat_agent(base_url, key)

    async def main():
        pool = GatewayPool(functools.partial(tool_loop_policy, "qwen3", "on"), workers=2,
                           renderer="qwen3", thinking="on", reward=reward)
        async with pool:
            urls = {w.url for w in pool.workers}
            assert len(urls) == 2
            source = AgentSource(pool, agent, concurrency=4)
            results = await source.collect([Task(f"t{i}", "q", "42") for i in range(4)])
            base_a, key_a = await pool.open_episode(Task("x", "q", "42"))
            other = next(u for u in urls if not base_a.startswith(u))
            async with aiohttp.ClientSession() as http:  # a key is known to its worker only
                async with http.get(other + "/v1/models",
                                    headers={"Authorization": f"Bearer {key_a}"}) as resp:
                    assert resp.status == 401
            stats = await pool.stats()
            assert sum(s["open"] for s in stats) == 1 and all(s["cpu_s"] > 0 for s in stats)
            await pool.finish(key_a)
        return results
    results = asyncio.run(main())
    assert [r.task.id for r in results] == ["t0", "t1", "t2", "t3"]
    for result in results:
        assert result.calls == 3 and result.forks == [] and result.reward == 1.0
        traj, = result.trajectories
        assert traj.task_id == result.task.id and traj.reward == 1.0
        assert len(traj.turns) == 3 and traj.num_policy_tokens > 0
        assert sum(traj.token_rewards) == 1.0 and result.answer == ANSWER
