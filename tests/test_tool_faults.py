"""A function tool's failure is the call's own (``tool_error``), and no tool can hold another
episode: every way a function can fail or stall, as a policy can make it (issue 43)."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from tests import hostile_tools as hostile
from tir_envs import TIREnv
from tir_envs.tools import Status, function_tool

BIG = int("7" * 2201)


def _env(*tools, **kwargs):
    return TIREnv(tool_format="json", tools=list(tools), tasks=[{"question": "q"}],
                  system_prompt="s", **kwargs)


def _call(name: str, **arguments) -> str:
    return f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>'


def test_an_unconvertible_product_is_the_calls_error_not_the_hosts():
    env = _env(function_tool(hostile.multiply))
    env.reset(options={"index": 0})
    obs, _, _, _, info = env.step(_call("multiply", a=BIG, b=BIG))
    turn = info["turn"]
    assert turn.status == "tool_error" and not env.trajectory.infra_failed
    assert "integer of about 4,402 digits" in env.codec.decode(obs["tokens"].tolist())
    env.close()


@pytest.mark.parametrize("fn, arguments, needle", [
    (hostile.cli, {"args": "--n x"}, "SystemExit: 2"),
    (hostile.cancels, {"x": 1}, "CancelledError"),
    (hostile.own_timeout, {"x": 1}, "TimeoutError: the tool's own deadline"),
    (hostile.interrupts, {"x": 1}, "KeyboardInterrupt"),
    (hostile.exits, {"code": 3}, "SystemExit: 3"),
    (hostile.nest, {"depth": 5000}, "nested deeper than 100 levels"),
])
def test_whatever_a_function_raises_is_a_tool_error(fn, arguments, needle, capsys):
    env = _env(function_tool(fn, timeout_s=5))
    env.reset(options={"index": 0})
    obs, _, _, _, info = env.step(_call(fn.__name__, **arguments))
    result = info["turn"].tool_results[0]
    text = env.codec.decode(obs["tokens"].tolist())
    assert result["status"] == "error" and needle in text, (result, text)
    assert info["turn"].status == "tool_error" and not env.trajectory.infra_failed
    # the episode goes on: the next step works, nothing is re-raised later
    _, _, terminated, _, _ = env.step("done")
    assert terminated
    env.close()


def test_a_flood_of_hanging_calls_holds_only_its_own_tool():
    hang = function_tool(hostile.hang, timeout_s=0.3)
    instant = function_tool(hostile.instant, timeout_s=2.0)

    async def main():
        flood = [hang.call({"x": 1}) for _ in range(12)]
        results = await asyncio.gather(*flood, instant.call({"x": 7}))
        return results[:-1], results[-1]
    flooded, bystander = asyncio.run(main())
    assert bystander.ok and bystander.text == "7"
    assert all(r.status == Status.TIMEOUT for r in flooded)
    # at most max_concurrency threads were ever started for the hanging tool
    assert sum(t.name == "tool:hang" for t in threading.enumerate()) <= hang.slots.size
    waited = [r for r in flooded if r.metadata.get("waited_for_slot")]
    assert len(waited) == 12 - hang.slots.size


def test_calls_per_turn_are_capped_by_default():
    env = _env(function_tool(hostile.instant))
    env.reset(options={"index": 0})
    _, _, _, _, info = env.step("".join(_call("instant", x=i) for i in range(400)))
    assert len(info["turn"].tool_results) == 16
    assert any("beyond max_calls_per_turn" in n for n in info["turn"].notes)
    env.close()


def test_the_episodes_tool_time_is_bounded():
    env = _env(function_tool(hostile.hang, timeout_s=30), max_tool_seconds=0.3)
    env.reset(options={"index": 0})
    _, _, terminated, truncated, info = env.step(_call("hang", x=1))
    assert info["turn"].tool_results[0]["status"] == "timeout"
    assert truncated and not terminated and env.trajectory.stop_reason == "max_time"
    env.close()


def test_process_isolation_stops_a_call_that_holds_the_gil():
    power = function_tool(hostile.power, timeout_s=0.5, isolation="process",
                          max_concurrency=1)
    try:
        async def main():
            await power.warm_up()
            ticks = 0

            async def ticker():
                nonlocal ticks
                while not done.is_set():
                    await asyncio.sleep(0.01)
                    ticks += 1
            done = asyncio.Event()
            task = asyncio.ensure_future(ticker())
            start = time.perf_counter()
            held = await power.call({"base": 3, "exponent": 50_000_000})
            elapsed = time.perf_counter() - start
            done.set()
            await task
            after = await power.call({"base": 2, "exponent": 10})
            return held, after, ticks, elapsed
        held, after, ticks, elapsed = asyncio.run(main())
        assert held.status == Status.TIMEOUT
        assert ticks > 0  # the loop ran while the worker computed
        assert after.ok and after.text == "1024"  # a fresh worker took the next call
        bad = asyncio.run(power.call({"base": 10, "exponent": 20_000}))
        assert bad.status == Status.ERROR and "digits" in bad.text
    finally:
        power.close()


def test_process_workers_yield_the_cpu_and_die_on_their_own():
    """A worker burning a core (a flood of GIL hogs the policy chose) runs at a lower priority
    than the host, under a CPU-time limit near its call's deadline (the kernel ends it even if
    the host thread that would kill it is gone), and is forked warm, not spawned."""
    import os
    import resource
    limits = function_tool(hostile.worker_limits, timeout_s=5, isolation="process")
    try:
        result = asyncio.run(limits.call({"x": 1}))
        assert result.ok, result.text
        nice, soft = (int(v) for v in result.text.split())
        assert nice >= os.nice(0) + 5
        assert soft != resource.RLIM_INFINITY and soft <= 5 + 60
        assert limits._workers._context.get_start_method() == "forkserver"
    finally:
        limits.close()


def test_process_isolation_refuses_what_it_cannot_send():
    with pytest.raises(TypeError, match="cannot be pickled"):
        function_tool(lambda x: x, name="anon", isolation="process")
    with pytest.raises(ValueError, match="isolation="):
        function_tool(hostile.instant, isolation="fork")
