"""Overhead of a no-tool ``step``, side by side with a bare tokenizer encode of the same text.

Prints JSON.  ``step_us`` is the median time of ``env.step(ids)`` for an action that calls no
tool (ledger append, decode to look for calls, budget checks); ``encode_us`` is the median
time to encode the same action text with the same (Rust) tokenizer, the least a text-based
pipeline would pay.  Goal: ``step_us`` <= 100.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.perf.quick import QUICK, pick  # noqa: E402

from tir_envs.env import TIREnv  # noqa: E402

ACTION = ("Let me think about this step by step. The sum of the first n integers is "
          "n(n+1)/2, so for n = 100 we get 5050. I am fairly confident in this result.")


class ThinkingEnv(TIREnv):
    """A turn without a tool call that does not end the episode (pure thinking)."""

    def is_final(self, action_text, calls):
        return False


def median_us(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t)
    return statistics.median(times) / 1000


def main(repeats: int = pick(20000, 300)) -> dict:
    env = ThinkingEnv(tasks=["What is 1 + 2 + ... + 100?"], max_turns=10 ** 9,
                      max_total_tokens=10 ** 9)
    env.reset(seed=0)
    ids = env.codec.encode(ACTION)
    encode = env.codec._backend.encode
    for _ in range(pick(500, 50)):  # warm up both paths
        env.step(ids)
        encode(ACTION, add_special_tokens=False)
    step_us = median_us(lambda: env.step(ids), repeats)
    encode_us = median_us(lambda: encode(ACTION, add_special_tokens=False), repeats)

    terminal = TIREnv(tasks=["q"])
    samples = []
    for _ in range(pick(2000, 100)):
        terminal.reset(seed=0)
        t = time.perf_counter_ns()
        terminal.step(ids)
        samples.append(time.perf_counter_ns() - t)
    result = {
        "benchmark": "env_step",
        "action_tokens": len(ids),
        "step_us": round(step_us, 2),
        "terminal_step_us": round(statistics.median(samples) / 1000, 2),
        "encode_us": round(encode_us, 2),
        "step_over_encode": round(step_us / encode_us, 2),
        "goal_step_us": 100,
        "meets_goal": step_us <= 100,
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
