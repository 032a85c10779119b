"""Benchmark-harness overhead per item, against a bare loop that calls the graders directly.

Prints JSON.  The policy is the scripted oracle (each item's gold answer in its protocol, one
action, no tool call), so every second the harness spends is spent *around* the policy: env
reset and step, ledger, answer extraction and grading through the reward, the engine, the
per-sample record appended to ``samples.jsonl``, the live progress bar.  The policy's own time
is measured (each ``generate`` timed, one episode in flight) and taken out.

The baseline, run side by side on the same items and the same action texts: a plain loop that
extracts the answer and calls the grader itself (``tir_envs.rewards``: the math grader on a
fresh pool, QA exact match, SQL execution match), i.e. the least any evaluation must do.
``overhead_ratio`` = harness time per item without the policy / bare grading time per item.
``report_s``: rebuilding summary.json and report.md (maj@k, intervals, plots) afterwards.

    python benchmarks/perf/bench.py [--items 200] [--suites math500,bamboogle,spider]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.perf.quick import QUICK, pick  # noqa: E402

from benchmarks import get_suite, run  # noqa: E402
from benchmarks.oracle import final_format, gold_of, oracle  # noqa: E402


class TimedOracle:
    """The oracle, with the time spent inside it summed."""

    def __init__(self):
        self.inner = oracle()
        self.seconds = 0.0

    async def generate_job(self, job, prompt_ids, stop, sampling):
        t0 = time.perf_counter()
        out = await self.inner.generate_job(job, prompt_ids, stop, sampling)
        self.seconds += time.perf_counter() - t0
        return out


def bare_grading(suite_name: str, items: int) -> float:
    """Seconds to extract and grade the oracle's action text of each item directly."""
    suite = get_suite(suite_name)
    fmt = final_format(suite)
    work = [(part, task, fmt(gold_of(task, part.scoring), True)) for part, task in
            suite.items(items)]
    scoring = suite.parts[0].scoring
    if scoring == "math":
        from tir_envs.rewards.math import GraderPool, extract_final_answer
        with GraderPool(workers=2) as pool:
            pool.grade("x + 1", "1 + x")  # started and warm, as the harness's pool is
            t0 = time.perf_counter()
            ok = [pool.grade(extract_final_answer(text), str(task.answer)).correct
                  for _, task, text in work]
            return _checked(suite_name, ok, time.perf_counter() - t0)
    t0 = time.perf_counter()
    if scoring == "qa":
        from tir_envs.rewards.qa import exact_match, extract_answer
        ok = [exact_match(extract_answer(text), task.answer) for _, task, text in work]
    elif scoring == "sql":
        from tir_envs.rewards.sql import execution_match, extract_solution
        ok = [execution_match(extract_solution(text), task.answer, task.meta["db_path"])
              for _, task, text in work]
    else:
        raise ValueError(f"no bare grading loop for scoring {scoring!r}")
    return _checked(suite_name, ok, time.perf_counter() - t0)


def _checked(suite_name: str, ok: list[bool], seconds: float) -> float:
    assert all(ok), f"bare grading of {suite_name}: {ok.count(False)} golds did not grade"
    return seconds


def harness(suite_name: str, items: int) -> dict[str, float]:
    from tir_envs.rewards.math import default_pool
    default_pool().grade("x + 1", "1 + x")  # the env's grader pool started and warm
    run(suite_name, oracle(), out=tempfile.mkdtemp(), k=1, limit=1, progress=False,
        report=False)  # first env, tokenizer, data and database caches: not per item
    policy = TimedOracle()
    with tempfile.TemporaryDirectory() as folder:
        t0 = time.perf_counter()
        run(suite_name, policy, out=folder, k=1, limit=items, concurrency=1, progress=True,
            report=False)
        wall = time.perf_counter() - t0
        t1 = time.perf_counter()
        from benchmarks.report import write_outputs
        summary = write_outputs(folder)
        report_s = time.perf_counter() - t1
    acc = next(iter(summary["suites"][suite_name]["parts"].values()))["avg_at_k"]
    assert acc == 1.0, f"the oracle scored {acc} on {suite_name}"
    return {"wall_s": wall, "policy_s": policy.seconds, "report_s": report_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=pick(200, 3),
                    help="items per suite (default 200; PERF_QUICK=1: 3)")
    ap.add_argument("--suites", default="math500,bamboogle,spider")
    args = ap.parse_args()
    out = {"items_per_suite_max": args.items, "load_avg_1m": round(os.getloadavg()[0], 2), "suites": {}}
    for name in args.suites.split(","):
        bare = bare_grading(name, args.items)
        h = harness(name, args.items)
        n = len(get_suite(name).items(args.items))
        overhead = (h["wall_s"] - h["policy_s"]) / n
        out["suites"][name] = {
            "items": n,
            "harness_ms_per_item": round(1000 * h["wall_s"] / n, 3),
            "policy_ms_per_item": round(1000 * h["policy_s"] / n, 3),
            "harness_overhead_ms_per_item": round(1000 * overhead, 3),
            "bare_grading_ms_per_item": round(1000 * bare / n, 3),
            "overhead_ratio": round(overhead / (bare / n), 2),
            "report_s": round(h["report_s"], 3),
        }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
