"""``GatewayPool``: episodes on disjoint worker processes, ledgers back to the host, rewards
scored there; the same results a single gateway gives."""

from __future__ import annotations

import asyncio

import aiohttp
import openai

from tests.gateway_helpers import Answers
from tir_envs.gateway import AgentSource, GatewayPool
from tir_envs.task import Task


async def two_turns(task, base_url, key):
    """An agent on the real ``openai`` SDK: asks, sends the answer back, asks again."""
    client = openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0)
    messages = [{"role": "user", "content": f"task {task.id}"}]
    for _ in range(2):
        reply = await client.chat.completions.create(model="tir-policy", messages=messages)
        messages += [{"role": "assistant", "content": reply.choices[0].message.content},
                     {"role": "user", "content": "sure?"}]
    await client.close()
    return messages[-2]["content"]


def test_pool_routes_each_episode_to_its_worker_and_returns_its_ledger():
    def reward(task, conversation):  # host-side: never pickled, never run in a worker
        return 1.0 if conversation and "Forty-two" in conversation[-1]["content"] else 0.0

    async def main():
        async with GatewayPool(Answers, workers=2, reward=reward) as pool:
            urls = {w.url for w in pool.workers}
            assert len(urls) == 2
            results = await AgentSource(pool, two_turns, concurrency=4).collect(
                [Task(f"t{i}", "q", "42") for i in range(4)])
            base_a, key_a = await pool.open_episode(Task("x", "q", "42"))
            other = next(u for u in urls if not base_a.startswith(u))
            async with aiohttp.ClientSession() as http:  # a key is known to its worker only
                async with http.get(other + "/v1/models",
                                    headers={"Authorization": f"Bearer {key_a}"}) as resp:
                    assert resp.status == 401
            stats = await pool.stats()
            assert sorted(s["open"] for s in stats) == [0, 1]
            assert all(s["cpu_s"] > 0 for s in stats)
            await pool.finish(key_a)
        return results
    results = asyncio.run(main())
    assert [r.task.id for r in results] == ["t0", "t1", "t2", "t3"]
    for result in results:
        assert result.calls == 2 and result.forks == [] and result.reward == 1.0
        traj, = result.trajectories
        assert traj.task_id == result.task.id and traj.reward == 1.0
        assert len(traj.turns) == 2 and traj.num_policy_tokens == 2 * len(Answers().ids)
        assert sum(traj.token_rewards) == 1.0 and result.agent_answer == "Forty-two."
