"""The gateway's limits: a cap on open episodes, idle-episode expiry and long renders off the
event loop (issue 41/43.5).

An episode nobody calls for ``idle_timeout_s`` is ended, its ledger kept as far as it got and
flagged (``infra_failed``, kind ``timeout``: trainers drop it), handed to the ``on_finish``
hooks and returned by ``finish``; a call on it is 410.  Opening past ``max_episodes`` is a
clear error (``GatewayFull``; 503 on the admin route).  A conversation long enough to take
seconds to encode is rendered in a worker thread, so other episodes' calls go on."""

from __future__ import annotations

import asyncio
import threading
import time

import aiohttp
import pytest

from tests.gateway_helpers import Answers
from tir_envs.gateway import Gateway, GatewayFull


async def call(http, gw, key, text="hi"):
    async with http.post(gw.url + "/v1/chat/completions",
                         json={"model": "tir-policy",
                               "messages": [{"role": "user", "content": text}]},
                         headers={"Authorization": f"Bearer {key}"}) as resp:
        return resp.status, await resp.json()


def test_idle_episodes_expire_flagged_and_come_back_to_the_host():
    async def main():
        seen = []
        async with Gateway(Answers(), idle_timeout_s=60, max_episodes=3) as gw, \
                aiohttp.ClientSession() as http:
            gw.on_finish.append(seen.append)
            _, used = gw.open_episode()
            _, untouched = gw.open_episode()
            _, busy = gw.open_episode()
            assert (await call(http, gw, used))[0] == 200
            gw.episodes[busy].busy = 1  # a call in flight is never idle
            expired = gw.expire_idle(now=time.monotonic() + 61)
            assert len(expired) == 2 and set(gw.episodes) == {busy}
            status, body = await call(http, gw, used)
            assert status == 410 and "expired" in body["error"]["message"]
            result = await gw.finish(used, agent_answer="late")
            traj, = result.trajectories
            assert traj.infra_failed and traj.failure.kind == "timeout"
            assert traj.metadata["gateway"]["expired"] and result.metadata["expired"]
            assert result.calls == 1 and result.reward is None and "expired" in result.error
            assert traj.num_policy_tokens == len(Answers().ids)  # the ledger as far as it got
            assert result.agent_answer == "late" and seen[0] is result
            assert (await gw.finish(untouched)).trajectories == []
            with pytest.raises(Exception, match="unknown episode key|ended"):
                await gw.finish(used)  # returned once
            gw.episodes[busy].busy = 0
        return seen
    assert len(asyncio.run(main())) == 2


def test_the_reaper_runs_by_itself():
    async def main():
        async with Gateway(Answers(), idle_timeout_s=0.2) as gw:
            _, key = gw.open_episode()
            for _ in range(100):
                await asyncio.sleep(0.05)
                if key in gw.expired:
                    break
            assert key not in gw.episodes and key in gw.expired
    asyncio.run(main())


def test_open_episodes_are_capped_with_a_clear_error():
    async def main():
        async with Gateway(Answers(), max_episodes=2, admin_token="adm") as gw, \
                aiohttp.ClientSession() as http:
            keys = [gw.open_episode()[1] for _ in range(2)]
            with pytest.raises(GatewayFull, match="max_episodes=2"):
                gw.open_episode()
            async with http.post(gw.url + "/gateway/episodes",
                                 headers={"Authorization": "Bearer adm"}) as resp:
                assert resp.status == 503 and "max_episodes" in \
                    (await resp.json())["error"]["message"]
            await gw.finish(keys[0])
            gw.open_episode()  # room again
    asyncio.run(main())
    for bad in ({"max_episodes": 0}, {"idle_timeout_s": 0}, {"idle_timeout_s": "1"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            Gateway(Answers(), **bad)


def test_a_long_conversation_is_rendered_off_the_loop_and_exactly():
    async def main():
        async with Gateway(Answers()) as gw:
            render, threads = gw.engine.render, []

            def spy(messages, tools):
                threads.append(threading.get_ident())
                return render(messages, tools)
            gw.engine.render = spy
            ticks = 0

            async def bystander():  # another episode's work: runs while the long one encodes
                nonlocal ticks
                while True:
                    await asyncio.sleep(0)
                    ticks += 1
            for text in ("short", " ".join(f"w{i % 997}" for i in range(30_000))):
                _, key = gw.open_episode()
                messages = [{"role": "user", "content": text}]
                other = asyncio.ensure_future(bystander())
                ticks = 0
                await gw.episodes[key].complete(messages, None, {})
                other.cancel()
                traj, = (await gw.finish(key)).trajectories
                assert traj.prompt_ids == render(messages, None)  # the same ids either way
            assert threads[0] == threading.get_ident() != threads[1]
            assert ticks > 0
    asyncio.run(main())
