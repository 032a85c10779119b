"""Benchmark-harness overhead per item, against a bare loop that parses and grades the same
answers directly.  Prints JSON.

The policy is scripted: one action per item, no tool call, so every second the harness spends
is spent *around* the policy: env reset and step, ledger, answer extraction and grading through
the reward, the episode runner, the per-sample record appended to ``samples.jsonl``, the run
folder's lock, the live progress bar.  The policy's own time is measured (each ``generate``
timed) and taken out.

What it answers matters: grading identical strings settles on the grader's fast path and says
little.  For math the policy writes realistic, non-identical answers (``answer_variant``): a
quarter verbatim, a quarter the gold restyled (``\\dfrac``, spacing, ``\\left(``), a quarter an
equivalent form (``\\frac{2n}{2}`` for an integer n, the gold restyled otherwise) and a
quarter wrong (n + 1, or the gold ``+ 1``), so most answers go through the full
equivalence check in the grader's worker processes.

The baseline, run side by side on the same items and action texts: extract the final answer
and grade it (``tir_envs.rewards``: the math grader's ``grade_many`` over a pool with as many
workers as the harness's own, QA exact match, SQL execution match), the least any evaluation
must do.  Its verdicts must equal the harness's, item for item.

* ``harness_overhead_ms_per_item`` = (harness wall − policy − bare grading) / items: what the
  harness adds beyond parsing and grading (the bar: <= 1.5 ms on MATH-500 at the default
  concurrency).
* ``harness_minus_bare_ms_per_item`` = (harness wall − bare grading) / items, the policy's
  time left in: an upper bound on the overhead that does not rest on timing the policy.
* ``overhead_ratio`` = (harness wall − policy) / bare grading.
* ``harness_overhead_cpu_ms_per_item``: the same difference in this process's CPU time (the
  grading itself runs in the pool's worker processes for both): on a loaded machine wall
  times swing with other work, CPU time much less.  Each side runs ``--repeats`` times,
  alternating; the fastest counts.
* ``report_s``: rebuilding summary.json and report.md (maj@k, intervals, plots) afterwards.

    python benchmarks/perf/bench.py [--items 500] [--suites math500] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tir_envs.bench.perf.quick import pick  # noqa: E402

from tir_envs.bench import get_suite, run  # noqa: E402
from tir_envs.bench.oracle import ItemScriptedPolicy, gold_of, written  # noqa: E402
from tir_envs.bench.store import RunStore  # noqa: E402


def answer_variant(gold: str, item: int, scoring: str) -> str:
    """A realistic answer to item ``item`` (module docstring); QA and SQL answer the gold."""
    if scoring != "math":
        return gold
    kind = item % 4
    if kind == 0:
        return gold
    restyled = re.sub(r"\\frac", r"\\dfrac", gold).replace(",", ", ")
    if gold.startswith("(") and gold.endswith(")"):
        restyled = f"\\left{restyled[:-1]}\\right)"
    integer = re.fullmatch(r"-?\d+", gold) is not None
    if kind == 1:
        return restyled if restyled != gold else f" {gold} "
    if kind == 2:
        return f"\\frac{{{2 * int(gold)}}}{{2}}" if integer else (
            restyled if restyled != gold else f"{{{gold}}}")
    return str(int(gold) + 1) if integer else f"{gold} + 1"


class TimedScript(ItemScriptedPolicy):
    """Each item's answer variant in its protocol, with the time spent generating summed."""

    def __init__(self):
        super().__init__(self._script)
        self.seconds = 0.0
        self.cpu_s = 0.0

    @staticmethod
    def _script(job) -> list[str]:
        return [written(job.protocol, answer_variant(gold_of(job.task, job.part.scoring),
                                                     job.item, job.part.scoring))]

    async def generate_job(self, job, prompt_ids, stop, sampling):
        t0, c0 = time.perf_counter(), time.thread_time()
        out = await super().generate_job(job, prompt_ids, stop, sampling)
        self.seconds += time.perf_counter() - t0
        self.cpu_s += time.thread_time() - c0  # it never awaits: all of it is this thread's
        return out


def suite_protocol(suite):
    """The protocol the suite's env writes answers with (the same the harness's oracle uses)."""
    from tir_envs.registry import make

    env = make(suite.env_id, **suite.env_kwargs, tasks=[task for _, task in suite.items(1)])
    try:
        return env.unwrapped.protocol
    finally:
        env.close()


def bare_grading(suite_name: str, items: int) -> tuple[float, float, list[bool]]:
    """Wall and this process's CPU seconds to extract and grade each item's action text
    directly, and the verdicts."""
    from tir_envs.answers.math import extract_final_answer
    from tir_envs.rewards.math import GraderPool, default_pool
    from tir_envs.rewards.math.reward import gold_text

    suite = get_suite(suite_name)
    protocol = suite_protocol(suite)
    work = [(task, written(protocol, answer_variant(gold_of(task, part.scoring), i,
                                                    part.scoring)))
            for i, (part, task) in enumerate(suite.items(items))]
    scoring = suite.parts[0].scoring
    if scoring == "math":
        fallback = suite.env_kwargs.get("extraction") == "fallback"
        with GraderPool(workers=default_pool().workers) as pool:
            pool.grade("x + 1", "1 + x")  # started and warm, as the harness's pool is
            t0, c0 = time.perf_counter(), time.process_time()
            found = [extract_final_answer(text, fallback=fallback) for _, text in work]
            grades = pool.grade_many([(f, gold_text(task.answer))
                                      for f, (task, _) in zip(found, work)])
            return (time.perf_counter() - t0, time.process_time() - c0,
                    [g.correct for g in grades])
    t0, c0 = time.perf_counter(), time.process_time()
    if scoring == "qa":
        from tir_envs.answers.tags import extract_answer
        from tir_envs.rewards.qa import exact_match
        ok = [exact_match(extract_answer(text), task.answer) for task, text in work]
    elif scoring == "sql":
        from tir_envs.answers.tags import extract_solution
        from tir_envs.rewards.sql import execution_match
        ok = [execution_match(extract_solution(text), task.answer, task.meta["db_path"])
              for task, text in work]
    else:
        raise ValueError(f"no bare grading loop for scoring {scoring!r}")
    return time.perf_counter() - t0, time.process_time() - c0, ok


def harness(suite_name: str, items: int, concurrency: int) -> dict[str, object]:
    from tir_envs.rewards.math import default_pool
    default_pool().close()  # a fresh pool: none of its remembered verdicts from a repeat
    default_pool().grade("x + 1", "1 + x")  # the env's grader pool started and warm
    run(suite_name, "oracle", out=tempfile.mkdtemp(), k=1, limit=1, progress=False,
        report=False)  # first env, tokenizer, data and database caches: not per item
    policy = TimedScript()
    with tempfile.TemporaryDirectory() as folder:
        t0, c0 = time.perf_counter(), time.process_time()
        run(suite_name, policy, out=folder, k=1, limit=items, concurrency=concurrency,
            progress=True, report=False)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        verdicts = [r["correct"] for r in RunStore(folder).suite_records(suite_name)]
        t1 = time.perf_counter()
        from tir_envs.bench.report import write_outputs
        write_outputs(folder)
        report_s = time.perf_counter() - t1
    return {"wall_s": wall, "cpu_s": cpu, "policy_s": policy.seconds,
            "policy_cpu_s": policy.cpu_s, "report_s": report_s, "verdicts": verdicts}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=pick(500, 8),
                    help="items per suite (default 500; PERF_QUICK=1: 8)")
    ap.add_argument("--suites", default="math500")
    ap.add_argument("--concurrency", type=int, default=32, help="episodes in flight (the "
                                                                "harness's default, 32)")
    ap.add_argument("--repeats", type=int, default=pick(3, 1),
                    help="baseline and harness alternate this often; the fastest of each counts "
                         "(the least disturbed by other load)")
    args = ap.parse_args()
    out = {"items_per_suite_max": args.items, "concurrency": args.concurrency,
           "repeats": args.repeats, "load_avg_1m_before": round(os.getloadavg()[0], 2),
           "suites": {}}
    for name in args.suites.split(","):
        bares, runs = [], []
        for _ in range(args.repeats):
            bare_s, bare_cpu, expected = bare_grading(name, args.items)
            bares.append((bare_s, bare_cpu))
            runs.append(harness(name, args.items, args.concurrency))
            disagree = sum(a != b for a, b in zip(runs[-1]["verdicts"], expected))
            if disagree or len(runs[-1]["verdicts"]) != len(expected):
                raise AssertionError(f"{name}: the harness and the bare loop disagree on "
                                     f"{disagree} items")
        bare = min(b[0] for b in bares)
        bare_cpu = min(b[1] for b in bares)
        h = min(runs, key=lambda r: r["wall_s"] - r["policy_s"])
        cpu = min(r["cpu_s"] - r["policy_cpu_s"] for r in runs)
        n = len(expected)
        overhead = h["wall_s"] - h["policy_s"] - bare
        out["suites"][name] = {
            "items": n, "correct": sum(expected),
            "harness_ms_per_item": round(1000 * h["wall_s"] / n, 3),
            "policy_ms_per_item": round(1000 * h["policy_s"] / n, 3),
            "bare_grading_ms_per_item": round(1000 * bare / n, 3),
            "harness_overhead_ms_per_item": round(1000 * overhead / n, 3),
            # the policy's wall time swings with preemption on a loaded machine; not taking
            # it out gives an upper bound on the overhead that does not depend on it
            "harness_minus_bare_ms_per_item": round(1000 * (h["wall_s"] - bare) / n, 3),
            "overhead_ratio": round((h["wall_s"] - h["policy_s"]) / bare, 2),
            # CPU time of this process (grading itself runs in the pool's worker processes,
            # the same work for both): robust to other load, unlike wall time
            "harness_cpu_ms_per_item": round(1000 * cpu / n, 3),
            "bare_cpu_ms_per_item": round(1000 * bare_cpu / n, 3),
            "harness_overhead_cpu_ms_per_item": round(1000 * (cpu - bare_cpu) / n, 3),
            "report_s": round(h["report_s"], 3),
        }
    out["load_avg_1m_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
