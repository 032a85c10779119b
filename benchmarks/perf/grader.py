"""Grader throughput with 2 worker processes, and proof that a timeout holds.

Prints JSON.  Workloads come from the shipped benchmarks:
  * ``rl``: what a GRPO step asks for: per task a group of 8 predictions (the gold answer
    verbatim, rewritten equal forms, wrong answers), over MATH-500, GSM8K and AIME.  Counts the
    in-caller fast path and the cache, as training would.  Goal: >= 300 grades/s.
  * ``symbolic``: only distinct pairs that need Math-Verify (no fast path, no cache hits), split
    in two halves: ``cold`` is the first half on fresh processes, ``warm`` the second half after
    them (Math-Verify's LaTeX parser gets much faster once it has seen each answer shape, so
    steady-state training throughput is the warm figure).
The baseline is Math-Verify called in one fresh process, one pair at a time (what a reward function
without a pool does), warmed up like a worker.  Baseline and pool alternate twice on the same
pairs; ``speedup`` is the median pool rate over the median baseline rate.  The machine's load
average is printed with the figures: two workers cannot beat one process without two idle cores.
``timeout``: pathological answers (``9^{9^{9^9}}``, a matrix to the power 10^9) against a 2 s
limit: the call returns on time, the worker is replaced, and the next grade succeeds; an answer
over 4000 characters is refused at once (``too_long``).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tir_envs.bench.perf.quick import QUICK, pick  # noqa: E402

from tir_envs.data.math import load_math_tasks  # noqa: E402
from tir_envs.rewards.math import GraderPool  # noqa: E402
from tir_envs.rewards.math.normalize import prepare_answer, quick_verdict  # noqa: E402


def rewrites(gold: str) -> list[str]:
    """Equal forms of a gold answer a policy might write."""
    forms = [f"x = {gold}", gold.replace(" ", ""), f"\\left({gold}\\right)" if gold.startswith("(")
             else f"{gold}\\text{{ units}}"]
    if gold.isdigit() and int(gold) >= 1000:
        forms.append(f"{int(gold):,}")
    if "\\frac" in gold:
        forms.append(gold.replace("\\frac", "\\dfrac"))
    return forms


def rl_workload(seed: int = 0, group: int = 8) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    tasks = (load_math_tasks("math500")[:pick(200, 8)] + load_math_tasks("gsm8k")[:pick(60, 4)]
             + load_math_tasks("aime2024")[:pick(None, 2)]
             + load_math_tasks("aime2025")[:pick(None, 2)])
    golds = [t.answer for t in tasks]
    pairs = []
    for gold in golds:
        preds = [gold] * 3 + rng.sample(rewrites(gold), 2) + rng.sample(golds, 3)
        pairs += [(p, gold) for p in preds[:group]]
    rng.shuffle(pairs)
    return pairs


def symbolic_workload(pairs: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The pairs that need Math-Verify, distinct, shuffled, in two halves."""
    todo = sorted({(p, g) for p, g in pairs
                   if quick_verdict(prepare_answer(p), prepare_answer(g)) is None})
    random.Random(1).shuffle(todo)
    return [todo[::2], todo[1::2]]


def rate(n: int, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else float("inf")


def timed_pool(pool: GraderPool, pairs) -> float:
    start = time.perf_counter()
    pool.grade_many(pairs)
    return time.perf_counter() - start


_BASELINE = """
import json, sys, time
from tir_envs.rewards.math import verify
verify.quiet(); verify.warm_up()
halves = json.load(sys.stdin)
for pairs in halves:
    start = time.perf_counter()
    for p, g in pairs:
        verify.verify_pair(p, g)
    print(time.perf_counter() - start)
"""


def inline_baseline(halves) -> list[float]:
    """Seconds for one fresh process to check each half one pair at a time (after the same
    warm-up as a worker), in order."""
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _BASELINE], input=json.dumps(halves),
                          capture_output=True, text=True, env=env, check=True)
    return [float(x) for x in done.stdout.strip().splitlines()[-len(halves):]]


def timeout_check(pool: GraderPool, limit_s: float = 2.0) -> dict:
    out = {}
    for name, pred in [("tower", "9^{9^{9^9}}"),
                       ("huge_matrix_power", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}^{1000000000}"),
                       ("long_answer", "+".join(f"x_{{{i}}}^{{{i}}}" for i in range(2000)))]:
        start = time.perf_counter()
        grade = pool.grade(pred, "1", timeout_s=limit_s)
        out[name] = {"status": grade.status, "correct": grade.correct,
                     "returned_after_s": round(time.perf_counter() - start, 3)}
    start = time.perf_counter()
    after = pool.grade("(1, 3/2)", "\\left(1, \\frac{3}{2}\\right)")  # needs a live worker
    out["next_grade_after_timeouts"] = {"correct": after.correct, "status": after.status,
                                        "seconds": round(time.perf_counter() - start, 3)}
    out["limit_s"] = limit_s
    out["held"] = all(v["returned_after_s"] < limit_s + 1.5 for k, v in out.items()
                      if isinstance(v, dict) and "returned_after_s" in v)
    return out


def wait_ready(pool: GraderPool) -> None:
    pool.grade_many([("(1,2)", "(2,1)"), ("x^2", "x*x")])  # waits for every worker to start


def main() -> dict:
    load_before = [round(x, 2) for x in os.getloadavg()]
    rl = rl_workload()
    symbolic = symbolic_workload(rl)
    rates: dict[str, list[float]] = {"pool_cold": [], "pool_warm": [], "baseline_cold": [],
                                     "baseline_warm": []}
    for _ in range(pick(2, 1)):  # alternate, so both see the same machine
        cold, warm = inline_baseline(symbolic)
        rates["baseline_cold"].append(rate(len(symbolic[0]), cold))
        rates["baseline_warm"].append(rate(len(symbolic[1]), warm))
        with GraderPool(workers=2, timeout_s=10) as pool:
            wait_ready(pool)
            rates["pool_cold"].append(rate(len(symbolic[0]), timed_pool(pool, symbolic[0])))
            rates["pool_warm"].append(rate(len(symbolic[1]), timed_pool(pool, symbolic[1])))
    med = {k: statistics.median(v) for k, v in rates.items()}
    with GraderPool(workers=2, timeout_s=10) as pool:
        wait_ready(pool)
        rl_s = timed_pool(pool, rl)
        stats = dict(pool.stats)
        timeouts = timeout_check(pool)
    result = {
        "benchmark": "grader",
        "workers": 2,
        "rl": {"pairs": len(rl), "seconds": round(rl_s, 3), "grades_per_s": rate(len(rl), rl_s),
               "goal_grades_per_s": 300, "meets_goal": rate(len(rl), rl_s) >= 300,
               "pool_stats": stats},
        "symbolic": {"pairs_per_half": [len(h) for h in symbolic],
                     "grades_per_s": rates,
                     "speedup_warm": round(med["pool_warm"] / med["baseline_warm"], 2),
                     "speedup_cold": round(med["pool_cold"] / med["baseline_cold"], 2)},
        "timeout": timeouts,
        "cpu_count": os.cpu_count(),
        "loadavg_before": load_before,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
