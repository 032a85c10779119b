"""Episodes per second of the async rollout schedule against the synchronous baseline.

Prints JSON.  Both schedules run the same episodes side by side in one process: a simulated
policy that costs a fixed time per generated token (``ScriptedPolicy(token_delay_s=...)``, a
server under continuous batching: requests do not slow each other down) and a tool whose
latency is heavy-tailed (log-normal; most calls are fast, a few are very slow, as sandboxes
and retrievers are).  Every call's latency is fixed by the episode and turn, so the two runs
see exactly the same latencies.  ``async_over_sync`` is the ratio of episodes/s; goal >= 2.0.

The synchronous schedule waits, every turn, for the longest generation and the slowest tool
call of its batch; the async schedule lets each episode move on alone, so one slow call holds
up only its own episode.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tir_envs.bench.perf.quick import QUICK, pick  # noqa: E402

from tir_envs.env import TIREnv  # noqa: E402
from tir_envs.rollout.engine import collect  # noqa: E402
from tir_envs.rollout.scripted import ScriptedPolicy  # noqa: E402
from tir_envs.tools.base import Tool, ToolResult  # noqa: E402

TURNS = 3  # tool calls per episode, then an answer


def latency_s(key: str, median_s: float, sigma: float) -> float:
    """Log-normal latency fixed by ``key`` (episode and turn)."""
    return median_s * math.exp(sigma * random.Random(key).gauss(0.0, 1.0))


class SlowTool(Tool):
    """A ``python`` tool that only waits: its latency comes from the call's ``key:...``."""

    name = "python"

    def __init__(self, median_s: float, sigma: float):
        self.median_s, self.sigma = median_s, sigma

    async def call(self, arguments, session=None):
        await asyncio.sleep(latency_s(arguments["code"].strip(), self.median_s, self.sigma))
        return ToolResult("done")


def script(context: str) -> str:
    """Turn k of task t: a tool call keyed ``t/k`` with some reasoning, then the answer."""
    turn = context.count("<result>")
    task = context.split("Task ", 1)[1].split(":", 1)[0]
    sample = context.split("sample ", 1)[1].split(".", 1)[0]
    words = 10 + (int(task) * 7 + turn * 13 + int(sample) * 5) % 40  # 10..49 words
    thought = " ".join(["step"] * words)
    if turn >= TURNS:
        return f"{thought} <answer>done</answer><|im_end|>"
    return f"{thought}\n<python>{task}/{sample}/{turn}</python>"


def run(mode: str, tasks: int, samples: int, concurrency: int, token_delay_s: float,
        median_s: float, sigma: float) -> dict:
    def env():
        return TIREnv(tools=[SlowTool(median_s, sigma)], tool_format="tags",
                      max_turns=TURNS + 1, max_total_tokens=4096)

    # Each sample gets its own question text so its tool latencies differ from its siblings'.
    questions = [f"Task {t}: sample {s}. Compute." for t in range(tasks) for s in range(samples)]
    policy = ScriptedPolicy(script, token_delay_s=token_delay_s)
    start = time.perf_counter()
    out = collect(env, policy, questions, max_concurrency=concurrency, mode=mode, progress=False)
    elapsed = time.perf_counter() - start
    assert all(len(t.turns) == TURNS + 1 and not t.infra_failed for t in out)
    return {"episodes": len(out), "seconds": round(elapsed, 3),
            "episodes_per_s": round(len(out) / elapsed, 3), "tool_calls": out.stats.tool_calls}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=pick(32, 4))
    ap.add_argument("--samples", type=int, default=pick(4, 2))
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--token-delay-ms", type=float, default=1.0)
    ap.add_argument("--tool-median-ms", type=float, default=40.0)
    ap.add_argument("--tool-sigma", type=float, default=1.2)
    a = ap.parse_args(argv)
    args = (a.tasks, a.samples, a.concurrency, a.token_delay_ms / 1000, a.tool_median_ms / 1000,
            a.tool_sigma)
    sync = run("sync", *args)
    async_ = run("async", *args)
    draws = sorted(latency_s(f"{t}/{s}/{k}", a.tool_median_ms, a.tool_sigma)
                   for t in range(a.tasks) for s in range(a.samples) for k in range(TURNS))
    ratio = async_["episodes_per_s"] / sync["episodes_per_s"]
    result = {
        "benchmark": "rollout_async_vs_sync",
        "episodes": sync["episodes"], "max_concurrency": a.concurrency,
        "turns_per_episode": TURNS + 1, "token_delay_ms": a.token_delay_ms,
        "tool_latency_ms": {"distribution": "lognormal", "median": a.tool_median_ms,
                            "sigma": a.tool_sigma,
                            "mean": round(sum(draws) / len(draws), 1),
                            "p99": round(draws[int(0.99 * (len(draws) - 1))], 1),
                            "max": round(draws[-1], 1)},
        "sync": sync, "async": async_,
        "async_over_sync": round(ratio, 2), "goal": 2.0, "meets_goal": ratio >= 2.0,
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
