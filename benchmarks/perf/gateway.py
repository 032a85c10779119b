"""Gateway overhead per call against the same backend called directly, the server's own CPU
per call, 1 against N worker processes, and memory per idle episode.

Prints JSON.  The backend is a scripted policy with a fixed latency (``latency_ms``: 50 in full
mode) answering a fixed 16-token completion.  **The load comes from another process**: this
script (the host) starts the gateway (``GatewayPool`` with ``workers`` processes) and a client
process (``gateway.py --client``, aiohttp only) that, for each concurrency (1 / 64 / 1,024 /
4,096 episodes in full mode), runs every episode's ``calls`` sequential calls (the second
extends the first's ledger: a tool turn), and the same calls straight to an identical backend
in its own loop (the direct baseline).  So the figures separate:

* ``server_cpu_ms_per_call``: the gateway processes' CPU (read from each worker) per call:
  **the figure that decides capacity**: ``cores_needed`` = offered calls/s x CPU per call;
* ``client_cpu_ms_per_call``: the load generator's own CPU (HTTP client, JSON);
* ``offered_calls_per_s`` (episodes / latency: what the agents would ask of a free gateway)
  against ``served_calls_per_s`` (what came back);
* latency: ``gateway_p50_ms``/``p99`` against ``direct_p50_ms``, ``overhead_p50_ms`` (the
  difference) and its fraction of a generation; ``lost`` (calls not answered 200) and
  ``mixed`` (an episode whose ledger holds another's prompt, or lacks a call).

Before the HTTP rows, ``server_path`` times the per-call work without HTTP (render, encode,
place in the ledger, parse) for the piece-cached encoder against the whole-text render it
replaced, as a ratio in the same run.  ``idle_episode_bytes``: Python memory
(``tracemalloc``) per episode left idle after one call on a 1,000-token prompt.
Goals (in the JSON): overhead p50 <= 1 ms and <= 5 % of a 50 ms generation at 4,096
concurrent, 0 lost, <= 64 KB per idle episode; a goal not met says so, with the figure and
what meeting it would take on the measured CPU per call.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tir_envs.bench.perf.quick import QUICK, pick  # noqa: E402

CONCURRENCY = pick([1, 64, 1024, 4096], [1, 8])
LATENCY_MS = pick(50.0, 5.0)
CALLS = 2
PROMPT_TOKENS = 200
IDLE_EPISODES = pick(1000, 50)
SERVER_PATH_EPISODES = pick(200, 10)
#: worker processes compared: one, and as many as the cores leave beside the client
WORKERS = pick(sorted({1, max(2, (os.cpu_count() or 2) - 1)}), [2])
GOALS = {"overhead_p50_ms": 1.0, "overhead_fraction_of_50ms": 0.05, "lost": 0,
         "idle_episode_bytes": 64 * 1024}
COMPLETION = "The answer is 42, as computed.<|im_end|>"


class FixedLatency:
    """A backend that takes ``latency_s`` and answers the same completion."""

    def __init__(self, tokenizer: Any, latency_s: float):
        self.tokenizer = tokenizer
        self.latency_s = latency_s
        self.ids = tokenizer.encode(COMPLETION, add_special_tokens=False)

    async def generate(self, prompt_ids, stop, sampling) -> Any:
        from tir_envs.rollout.policy import Generation

        await asyncio.sleep(self.latency_s)
        return Generation(list(self.ids), [-0.1] * len(self.ids), "stop")


def fixed_latency(latency_s: float) -> FixedLatency:
    """A worker's backend (built in the worker: a module-level function pickles by name)."""
    from tir_envs.tokenizer import qwen25_tokenizer

    return FixedLatency(qwen25_tokenizer(), latency_s)


def question(i: int, tokens: int, tok: Any) -> str:
    """A user message of about ``tokens`` tokens, distinct per episode."""
    words = " ".join(f"w{(i * 7 + j) % 997}" for j in range(tokens))
    ids = tok.encode(words, add_special_tokens=False)[:tokens]
    return f"episode {i}: " + tok.decode(ids)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


# ------------------------------------------------------------------------ the client process
async def client_job(job: dict[str, Any]) -> dict[str, Any]:
    """One concurrency level: the direct baseline, then every episode through the gateway."""
    import aiohttp

    latency = job["latency_s"]

    async def direct_episode(lat: list[float]) -> None:
        for _ in range(job["calls"]):
            t = time.perf_counter()
            await asyncio.sleep(latency)  # the backend the gateway calls, called directly
            lat.append((time.perf_counter() - t) * 1000)
    base: list[float] = []
    await asyncio.gather(*(direct_episode(base) for _ in job["episodes"]))

    lat: list[float] = []
    errors: dict[str, int] = {}
    timeout = aiohttp.ClientTimeout(total=None)  # a slow answer is measured, not lost
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     timeout=timeout) as http:
        async def episode(base_url: str, key: str, text: str) -> None:
            messages = [{"role": "user", "content": text}]
            for _ in range(job["calls"]):
                t = time.perf_counter()
                try:
                    async with http.post(base_url + "/chat/completions",
                                         json={"model": "tir-policy", "messages": messages},
                                         headers={"Authorization": f"Bearer {key}"}) as r:
                        body = await r.json()
                        why = "" if r.status == 200 else f"HTTP {r.status}"
                except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
                    why = type(exc).__name__
                lat.append((time.perf_counter() - t) * 1000)
                if why:
                    errors[why] = errors.get(why, 0) + 1
                    return
                messages += [body["choices"][0]["message"], {"role": "user", "content": "more"}]
        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(episode(u, k, q) for (u, k), q in
                               zip(job["episodes"], job["questions"])))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"direct": base, "gateway": lat, "errors": errors, "wall_s": wall, "cpu_s": cpu}


def client_main() -> None:
    """``--client``: read one job a line on stdin, answer one result a line on stdout."""
    for line in sys.stdin:
        print(json.dumps(asyncio.run(client_job(json.loads(line)))), flush=True)


# ------------------------------------------------------------------------ the host
class Client:
    """The load generator as a subprocess (its own interpreter, its own cores' share)."""

    async def start(self) -> "Client":
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--client", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, limit=1 << 30)
        return self

    async def run(self, job: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write((json.dumps(job) + "\n").encode())
        await self.proc.stdin.drain()
        line = await self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the client process exited (its error is above)")
        return json.loads(line)

    async def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        await self.proc.wait()


async def level(pool: Any, client: Client, n: int, tok: Any) -> dict[str, Any]:
    """One row: ``n`` concurrent episodes through ``pool``, measured from the client."""
    questions = [question(i, PROMPT_TOKENS, tok) for i in range(n)]
    episodes = [await pool.open_episode(task_id=f"q{i}") for i in range(n)]
    cpu0 = sum(s["cpu_s"] for s in await pool.stats())
    out = await client.run({"episodes": episodes, "questions": questions, "calls": CALLS,
                            "latency_s": LATENCY_MS / 1000})
    server_cpu = sum(s["cpu_s"] for s in await pool.stats()) - cpu0
    mixed = 0
    for i, (_, key) in enumerate(episodes):  # every ledger holds its own episode, whole
        result = await pool.finish(key)
        trajs = result.trajectories
        if len(trajs) != 1 or result.calls != CALLS or result.forks or \
                f"episode {i}:" not in tok.decode(trajs[0].prompt_ids[:40]):
            mixed += 1
    lat, base = out["gateway"], out["direct"]
    calls = len(lat)
    lost = sum(out["errors"].values())
    over = statistics.median(lat) - statistics.median(base)
    return {"workers": len(pool.workers), "episodes": n, "calls": calls, "lost": lost,
            "mixed": mixed, "errors": out["errors"],
            "direct_p50_ms": round(statistics.median(base), 3),
            "direct_p99_ms": round(pct(base, 0.99), 3),
            "gateway_p50_ms": round(statistics.median(lat), 3),
            "gateway_p99_ms": round(pct(lat, 0.99), 3),
            "overhead_p50_ms": round(over, 3),
            "overhead_fraction": round(over / LATENCY_MS, 4),
            "offered_calls_per_s": round(n / (LATENCY_MS / 1000), 1),
            "served_calls_per_s": round(calls / out["wall_s"], 1),
            "server_cpu_ms_per_call": round(server_cpu / calls * 1000, 3),
            # cores the workers used while the client waited: far below ``workers`` means the
            # machine (its other load), not the gateway, set the served rate
            "server_cores_busy": round(server_cpu / out["wall_s"], 2),
            "load_average_1m": round(os.getloadavg()[0], 2),
            "client_cpu_ms_per_call": round(out["cpu_s"] / calls * 1000, 3)}


async def server_path(tok: Any) -> dict[str, Any]:
    """Per-call work without HTTP: two calls per episode, the piece-cached encoder against the
    whole-text render (``tir_envs.chat.served.serving_renderer``), interleaved, same run."""
    from tir_envs.chat.served import serving_renderer
    from tir_envs.gateway import Gateway
    from tir_envs.gateway.render import PieceRender

    gw = Gateway(FixedLatency(tok, 0.0), tokenizer=tok)
    # the encoder as it was before it called the Rust tokenizer directly
    wrapped = PieceRender(gw.engine.renderer)
    wrapped._encode = lambda text: tok.encode(text, add_special_tokens=False)
    renders = {"piece_cached": gw.engine.render, "piece_cached_via_transformers": wrapped,
               "whole_text": serving_renderer(gw.engine.renderer)}
    spent = {name: 0.0 for name in renders}
    for i in range(-1, SERVER_PATH_EPISODES):  # episode -1 warms each variant, uncounted
        for j, (name, render) in enumerate(renders.items()):
            gw.engine.render = render
            _, key = gw.open_episode()
            ep = gw.episodes[key]
            # a text of its own: the tokenizer's word cache must not favour a later variant
            text = question(10_000 + i * len(renders) + j, PROMPT_TOKENS, tok)
            messages = [{"role": "user", "content": text}]
            t = time.process_time()
            for _ in range(CALLS):
                done = await ep.complete(messages, None, {})
                messages += [done.parsed.message(), {"role": "user", "content": "more"}]
            spent[name] += (time.process_time() - t) if i >= 0 else 0.0
            await gw.finish(key)
    per = {k: round(v / (SERVER_PATH_EPISODES * CALLS) * 1000, 3) for k, v in spent.items()}
    return {"cpu_ms_per_call": per,
            "whole_text_over_piece_cached": round(per["whole_text"] / per["piece_cached"], 2),
            "via_transformers_over_direct": round(per["piece_cached_via_transformers"]
                                                  / per["piece_cached"], 2)}


async def idle_bytes(tok: Any) -> int:
    """Memory per episode left idle after one call on a 1,000-token prompt."""
    import gc
    import tracemalloc

    from tir_envs.gateway import Gateway

    async with Gateway(FixedLatency(tok, 0.0), tokenizer=tok) as gw:
        prompts = [question(i, 1000, tok) for i in range(IDLE_EPISODES)]
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for text in prompts:
            _, key = gw.open_episode()
            await gw.episodes[key].complete([{"role": "user", "content": text}], None, {})
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        return (after - before) // IDLE_EPISODES


async def main() -> dict[str, Any]:
    import functools

    from tir_envs.bench.perf import gateway as this  # the factory pickles by this module's name
    from tir_envs.gateway import GatewayPool
    from tir_envs.tokenizer import qwen25_tokenizer

    tok = qwen25_tokenizer()
    path = await server_path(tok)
    rows = []
    client = await Client().start()
    try:
        for workers in WORKERS:
            async with GatewayPool(functools.partial(this.fixed_latency, LATENCY_MS / 1000),
                                   workers=workers, idle_timeout_s=None,
                                   max_episodes=max(CONCURRENCY) + 1) as pool:
                await level(pool, client, 8 * workers, tok)  # warm-up: first calls, caches
                for n in CONCURRENCY:
                    rows.append(await level(pool, client, n, tok))
    finally:
        await client.close()
    idle = await idle_bytes(tok)
    return report(rows, path, idle)


def report(rows: list[dict[str, Any]], path: dict[str, Any], idle: int) -> dict[str, Any]:
    """The JSON: rows, and each goal met or not with the measured figure and what it takes."""
    top_n = max(r["episodes"] for r in rows)
    top = min((r for r in rows if r["episodes"] == top_n), key=lambda r: r["overhead_p50_ms"])
    loaded = [r for r in rows if r["episodes"] > 1]
    cpu = min(r["server_cpu_ms_per_call"] for r in loaded or rows)
    offered = top["offered_calls_per_s"]
    cores = round(offered * cpu / 1000, 1)
    need = (f"{offered:.0f} calls/s offered at {top_n} episodes x {cpu} ms server CPU a call "
            f"= {cores} cores of gateway workers (this machine: {os.cpu_count()} cores, shared "
            "with the client), or a per-call cost that much lower")
    met = {"overhead_p50_ms": top["overhead_p50_ms"] <= GOALS["overhead_p50_ms"],
           "overhead_fraction": top["overhead_fraction"] <= GOALS["overhead_fraction_of_50ms"],
           "lost": all(r["lost"] == 0 and r["mixed"] == 0 for r in rows),
           "idle_episode_bytes": idle <= GOALS["idle_episode_bytes"]}
    return {"benchmark": "gateway", "quick": QUICK, "cpu_count": os.cpu_count(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "latency_ms": LATENCY_MS, "calls_per_episode": CALLS,
            "prompt_tokens": PROMPT_TOKENS, "setup": "client in its own process; gateway in "
            "`workers` worker processes (GatewayPool); server CPU read from the workers",
            "server_path": path, "rows": rows, "idle_episode_bytes": idle,
            "idle_prompt_tokens": 1000, "goals": GOALS, "met": met,
            "at_top_concurrency": {"episodes": top_n, "workers": top["workers"],
                                   "overhead_p50_ms": top["overhead_p50_ms"],
                                   "server_cpu_ms_per_call": cpu,
                                   "offered_calls_per_s": offered,
                                   "served_calls_per_s": top["served_calls_per_s"],
                                   "cores_needed": cores,
                                   "what_it_takes": None if met["overhead_p50_ms"] else need}}


if __name__ == "__main__":
    if sys.argv[1:] == ["--client"]:
        client_main()
    else:
        print(json.dumps(asyncio.run(main()), indent=2))
