"""Gateway overhead per call, against the same backend called directly; memory per episode.

Prints JSON.  The backend is a scripted policy with a fixed latency (``latency_ms``, 50 in full
mode) that answers a fixed 16-token completion.  For each concurrency (1 / 64 / 1,024 / 4,096
episodes in full mode) every episode makes ``calls`` sequential calls (the second extends the
first's ledger: a tool turn), once through the gateway over HTTP (``aiohttp`` client in the
same process) and once straight to ``policy.generate`` with the ids pre-rendered.  Per call:
``p50_ms``/``p99_ms`` of each, ``overhead_p50_ms`` (gateway p50 minus direct p50), the
fraction of a generation that is, and ``lost`` (requests that did not come back 200).  The
client and the server share this process and its cores: at high concurrency the figures are
an upper bound of the server's own cost; ``cpu_ms_per_call`` is the process's CPU per call
(server and client), the cost once the cores are not the limit.  ``idle_episode_bytes``: Python memory
(``tracemalloc``) per episode left idle after one call on a 1,000-token prompt.
Goals (in the JSON): overhead p50 <= 1 ms and <= 5 % of a 50 ms generation at 4,096
concurrent, 0 lost, <= 64 KB per idle episode.
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tir_envs.bench.perf.quick import QUICK, pick  # noqa: E402

import aiohttp  # noqa: E402

from tir_envs.gateway import Gateway  # noqa: E402
from tir_envs.rollout.policy import Generation, SamplingParams  # noqa: E402
from tir_envs.tokenizer import qwen25_tokenizer  # noqa: E402

CONCURRENCY = pick([1, 64, 1024, 4096], [1, 16])
LATENCY_MS = pick(50.0, 5.0)
CALLS = 2
IDLE_EPISODES = pick(1000, 50)
GOALS = {"overhead_p50_ms": 1.0, "overhead_fraction_of_50ms": 0.05, "lost": 0,
         "idle_episode_bytes": 64 * 1024}


class FixedLatency:
    """A backend that takes ``latency_s`` and answers the same completion."""

    def __init__(self, tokenizer, latency_s: float):
        self.latency_s = latency_s
        self.ids = tokenizer.encode("The answer is 42, as computed.<|im_end|>",
                                    add_special_tokens=False)

    async def generate(self, prompt_ids, stop, sampling: SamplingParams) -> Generation:
        await asyncio.sleep(self.latency_s)
        return Generation(list(self.ids), [-0.1] * len(self.ids), "stop")


def question(i: int, tokens: int, tok) -> str:
    """A user message of about ``tokens`` tokens, distinct per episode."""
    words = " ".join(f"w{(i * 7 + j) % 997}" for j in range(tokens))
    ids = tok.encode(words, add_special_tokens=False)[:tokens]
    return f"episode {i}: " + tok.decode(ids)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


async def through_gateway(gw: Gateway, http: aiohttp.ClientSession,
                          questions: list[str]) -> tuple[list[float], int]:
    lat: list[float] = []
    lost = 0
    errors: dict[str, int] = {}

    async def episode(i: int) -> None:
        nonlocal lost
        _, key = gw.open_episode()
        messages = [{"role": "user", "content": questions[i]}]
        for _ in range(CALLS):
            t = time.perf_counter()
            try:
                async with http.post(gw.url + "/v1/chat/completions",
                                     json={"model": "tir-policy", "messages": messages},
                                     headers={"Authorization": f"Bearer {key}"}) as r:
                    body = await r.json()
                    ok = r.status == 200
                    why = f"HTTP {r.status}"
            except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
                ok, why = False, type(exc).__name__
            lat.append((time.perf_counter() - t) * 1000)
            if not ok:
                lost += 1
                errors[why] = errors.get(why, 0) + 1
                return
            messages += [body["choices"][0]["message"], {"role": "user", "content": "more"}]
        await gw.finish(key)
    await asyncio.gather(*(episode(i) for i in range(len(questions))))
    return lat, lost, errors


async def direct(gw: Gateway, questions: list[str]) -> list[float]:
    """The same calls straight to the backend, every prompt rendered before the clock."""
    lat: list[float] = []
    policy, render, sampling = gw.engine.policy, gw.engine.render, gw.engine.sampling
    prompts = [render([{"role": "user", "content": q}], None) for q in questions]

    async def episode(i: int) -> None:
        ids = prompts[i]
        for _ in range(CALLS):
            t = time.perf_counter()
            gen = await policy.generate(ids, [], sampling)
            lat.append((time.perf_counter() - t) * 1000)
            ids = ids + gen.token_ids
    await asyncio.gather(*(episode(i) for i in range(len(questions))))
    return lat


async def idle_bytes(tok) -> int:
    """Memory per episode left idle after one call on a 1,000-token prompt."""
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


async def main() -> dict:
    tok = qwen25_tokenizer()
    rows = []
    connector = aiohttp.TCPConnector(limit=0)
    # no client deadline: a slow answer is measured, not counted lost
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=None, sock_read=None)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        async with Gateway(FixedLatency(tok, LATENCY_MS / 1000), tokenizer=tok) as gw:
            for n in CONCURRENCY:
                questions = [question(i, 200, tok) for i in range(n)]
                base = await direct(gw, questions)
                t, cpu = time.perf_counter(), time.process_time()
                lat, lost, errors = await through_gateway(gw, http, questions)
                wall, cpu = time.perf_counter() - t, time.process_time() - cpu
                over = statistics.median(lat) - statistics.median(base)
                rows.append({"episodes": n, "calls": len(lat), "lost": lost, "errors": errors,
                             "direct_p50_ms": round(statistics.median(base), 3),
                             "direct_p99_ms": round(pct(base, 0.99), 3),
                             "gateway_p50_ms": round(statistics.median(lat), 3),
                             "gateway_p99_ms": round(pct(lat, 0.99), 3),
                             "overhead_p50_ms": round(over, 3),
                             "overhead_fraction": round(over / LATENCY_MS, 4),
                             "calls_per_s": round(len(lat) / wall, 1),
                             # CPU of this process (gateway and client) per call: what the
                             # figures above cost when the machine is not shared
                             "cpu_ms_per_call": round(cpu / len(lat) * 1000, 3)})
    idle = await idle_bytes(tok)
    top = rows[-1]
    return {"benchmark": "gateway", "quick": QUICK, "latency_ms": LATENCY_MS,
            "calls_per_episode": CALLS, "prompt_tokens": 200, "rows": rows,
            "idle_episode_bytes": idle, "idle_prompt_tokens": 1000, "goals": GOALS,
            "met": {"overhead_p50_ms": top["overhead_p50_ms"] <= GOALS["overhead_p50_ms"],
                    "overhead_fraction": top["overhead_fraction"]
                    <= GOALS["overhead_fraction_of_50ms"],
                    "lost": all(r["lost"] == 0 for r in rows),
                    "idle_episode_bytes": idle <= GOALS["idle_episode_bytes"]}}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main()), indent=2))
