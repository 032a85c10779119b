"""What the new ways in cost per call, against the bare thing they wrap, side by side, as JSON.

* ``function``: a ``FunctionTool`` call (argument check, the function on a worker thread,
  result rendering) against calling the function directly, and against the same function
  awaited as an async function (no thread);
* ``mcp_stdio``: ``McpTools``' call (its loop thread, status mapping) against a bare
  ``mcp.Client.call_tool`` on its own connection to the same kind of stdio server;
* ``openenv``: one step of ``tir/ToolUse-v0`` served by ``tir-envs serve openenv`` and driven
  through OpenEnv's own client (WebSocket), against the same step on a local env; and that
  step's latency while other clients send 12 MB text actions (``flooded_ratio``);
* ``floods``: a bystander's call (a sync function tool) while another tool is flooded, against
  the same call idle (issue 43's bar: within 2x): 12 calls that never answer, calls that hold
  the GIL (``3 ** 12_000_000``, ``isolation="process"``).

Each pair is measured interleaved (``--rounds`` rounds, the median per call kept), so load on
the machine hits both sides alike; the ratios are the figures to read.  ``uptime`` is recorded.
Run: ``python benchmarks/perf/tools.py [--calls N]`` (``PERF_QUICK=1``: a few calls).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tir_envs.bench.perf.quick import pick  # noqa: E402
from tir_envs.bench.perf.servers import start, stop  # noqa: E402

SERVER = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("bench")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


server.run("stdio")
'''
TOOLS_MODULE = '''
def capital(country: str) -> str:
    """The capital city of a country.

    Args:
        country: the country's English name.
    """
    return {"France": "Paris"}.get(country, "unknown")
'''


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


async def aadd(a: int, b: int) -> int:
    """Add two integers (async)."""
    return a + b


def power(base: int, exponent: int) -> int:
    """base ** exponent (holds the GIL for seconds at 3 ** 12_000_000)."""
    return base ** exponent


def hang(seconds: float) -> float:
    """Sleeps past any deadline."""
    time.sleep(seconds)
    return seconds


async def _latency(fn, calls: int) -> float:
    """Median seconds of one ``fn(i)``."""
    times = []
    for i in range(calls):
        start = time.perf_counter()
        await fn(i)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def _under_flood(bystander, floods, calls: int) -> dict:
    """The bystander's median latency idle, then while ``floods`` (coroutine functions, each
    run in a loop) keep going; their ratio."""
    await bystander(0)
    idle = await _latency(bystander, calls)

    async def forever(flood):
        while True:
            await flood()
            await asyncio.sleep(0)  # a flood that answers at once still lets others run
    tasks = [asyncio.ensure_future(forever(f)) for f in floods]
    await asyncio.sleep(0.2)  # the flood is under way
    flooded = await _latency(bystander, calls)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return {"idle_ms": idle * 1e3, "flooded_ms": flooded * 1e3, "ratio": flooded / idle}


def bench_floods(calls: int) -> dict:
    from tir_envs.tools import function_tool
    bystander_tool = function_tool(add)

    async def bystander(i):
        r = await bystander_tool.call({"a": i, "b": 1})
        assert r.ok, r.text
    hanging = function_tool(hang, timeout_s=0.5)
    gil = function_tool(power, timeout_s=1.0, isolation="process", max_concurrency=2)

    async def main():
        await gil.warm_up()
        out = {"hanging_calls": await _under_flood(
            bystander, [lambda: hanging.call({"seconds": 5.0}) for _ in range(12)], calls)}
        out["gil_hog_isolated"] = await _under_flood(
            bystander, [lambda: gil.call({"base": 3, "exponent": 12_000_000})], calls)
        return out
    try:
        return asyncio.run(main())
    finally:
        gil.close()


#: two clients sending 12 MB text actions over and over (each refused at the WebSocket's size
#: cap), from another process so their own sending costs the bystander's process nothing
HUGE_TEXT_FLOOD = '''
import asyncio, json, sys
from websockets.asyncio.client import connect

async def one():
    text = json.dumps({"type": "step", "data": {"text": "x" * (12 << 20)}})
    while True:
        try:
            async with connect(f"ws://127.0.0.1:{sys.argv[1]}/ws", max_size=None) as ws:
                await ws.send(json.dumps({"type": "reset", "data": {"index": 0}}))
                await ws.recv()
                while True:  # the connection is closed at the first (over the size cap)
                    await ws.send(text)
                    await ws.recv()
        except Exception:
            await asyncio.sleep(0.01)

async def main():
    await asyncio.gather(one(), one())
asyncio.run(main())
'''


async def _under_process_flood(bystander, script: str, port: int, calls: int) -> dict:
    """The bystander's median latency idle, then while ``script`` floods from a subprocess."""
    await bystander(0)
    idle = await _latency(bystander, calls)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script, str(port))
    try:
        await asyncio.sleep(1.0)  # the flood is under way
        flooded = await _latency(bystander, calls)
    finally:
        proc.kill()
        await proc.wait()
    return {"idle_ms": idle * 1e3, "flooded_ms": flooded * 1e3, "ratio": flooded / idle}


async def _per_call(fn, calls: int) -> float:
    start = time.perf_counter()
    for i in range(calls):
        await fn(i)
    return (time.perf_counter() - start) / calls


async def _pairs(named: dict, calls: int, rounds: int) -> dict[str, float]:
    """Median seconds per call of each coroutine function in ``named``, interleaved, after
    one untimed call of each (a first call pays one-time costs: connections, imports)."""
    for fn in named.values():
        await fn(0)
    times: dict[str, list[float]] = {k: [] for k in named}
    for _ in range(rounds):
        for key, fn in named.items():
            times[key].append(await _per_call(fn, calls))
    return {k: statistics.median(v) for k, v in times.items()}


def bench_function(calls: int, rounds: int) -> dict:
    from tir_envs.tools import function_tool
    sync_tool, async_tool = function_tool(add), function_tool(aadd)

    async def bare(i):
        return add(i, 1)

    async def tool_sync(i):
        return await sync_tool.call({"a": i, "b": 1})

    async def tool_async(i):
        return await async_tool.call({"a": i, "b": 1})
    t = asyncio.run(_pairs({"bare": bare, "tool_sync": tool_sync, "tool_async": tool_async},
                           calls, rounds))
    return {"bare_us": t["bare"] * 1e6, "function_tool_sync_us": t["tool_sync"] * 1e6,
            "function_tool_async_us": t["tool_async"] * 1e6,
            "sync_minus_bare_us": (t["tool_sync"] - t["bare"]) * 1e6,
            "async_minus_bare_us": (t["tool_async"] - t["bare"]) * 1e6}


def bench_mcp(folder: Path, calls: int, rounds: int) -> dict:
    from mcp import Client, StdioServerParameters

    from tir_envs.tools.mcp_tools import McpTools
    script = folder / "bench_server"
    script.write_text(SERVER)
    command = [sys.executable, str(script)]
    tools = McpTools(command)
    tool = {t.name: t for t in tools.tools()}["add"]

    async def main():
        async with Client(StdioServerParameters(command=command[0], args=command[1:]),
                          mode="legacy") as client:
            async def bare(i):
                return await client.call_tool("add", {"a": i, "b": 1})

            async def ours(i):
                r = await tool.call({"a": i, "b": 1})
                assert r.ok, r.text
            return await _pairs({"bare": bare, "ours": ours}, calls, rounds)
    try:
        t = asyncio.run(main())
    finally:
        tools.close()
    return {"bare_client_ms": t["bare"] * 1e3, "mcp_tools_ms": t["ours"] * 1e3,
            "ratio": t["ours"] / t["bare"]}


def bench_openenv(folder: Path, calls: int, rounds: int) -> dict:
    from openenv.core import GenericEnvClient

    import tir_envs
    (folder / "bench_tools.py").write_text(TOOLS_MODULE)
    sys.path.insert(0, str(folder))
    kwargs = {"tasks": [{"question": "Capital of France?", "answer": "Paris"}],
              "tools": ["bench_tools:capital"], "max_turns": 10 ** 6,
              "max_total_tokens": 10 ** 7}
    port = _free_port()
    proc = start([sys.executable, "-m", "tir_envs.cli", "serve", "openenv", "tir/ToolUse-v0",
                 "--env-arg", "tasks=" + json.dumps(kwargs["tasks"]), "--env-arg",
                 'tools=["bench_tools:capital"]', "--env-arg", "max_turns=1000000",
                 "--env-arg", "max_total_tokens=10000000", "--port", str(port)], folder, port,
                 timeout=180)
    local = tir_envs.make("tir/ToolUse-v0", **kwargs).unwrapped
    action = local.codec.encode(local.protocol.render_call("capital", "France"))

    async def main():
        await local.areset(options={"index": 0})
        async with GenericEnvClient(base_url=f"http://127.0.0.1:{port}") as client:
            await client.reset(index=0)

            async def direct(i):
                await local.astep(action)

            async def served(i):
                await client.step({"tokens": action})
            pairs = await _pairs({"direct": direct, "served": served}, calls, rounds)

            flood = await _under_process_flood(served, HUGE_TEXT_FLOOD, port, max(3, calls))
            return pairs, flood
    try:
        t, flood = asyncio.run(main())
    finally:
        local.close()
        stop(proc)
    return {"direct_step_ms": t["direct"] * 1e3, "served_step_ms": t["served"] * 1e3,
            "served_minus_direct_ms": (t["served"] - t["direct"]) * 1e3,
            "ratio": t["served"] / t["direct"], "flooded_by_12mb_texts": flood}


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=pick(200, 5), help="calls per round")
    parser.add_argument("--rounds", type=int, default=pick(5, 1))
    args = parser.parse_args()
    out: dict = {"load": os.getloadavg(), "calls_per_round": args.calls, "rounds": args.rounds}
    out["uptime"] = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    out["function"] = bench_function(args.calls * 10, args.rounds)
    out["floods"] = bench_floods(max(5, args.calls // 4))
    with tempfile.TemporaryDirectory() as tmp:
        out["mcp_stdio"] = bench_mcp(Path(tmp), args.calls, args.rounds)
        out["openenv"] = bench_openenv(Path(tmp), max(1, args.calls // 4), args.rounds)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
