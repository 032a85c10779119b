"""Benchmark suites, the harness that runs them, metrics and reports (docs/benchmarks.md).

``benchmarks.run(["math500"], "vllm:/models/x", k=8, out="runs/x")`` (or
``benchmarks.run(RunConfig(...))``) evaluates a policy and writes a run folder; ``tir-envs
bench`` is the same from the command line.  The names are imported on first use, so
``tir-envs bench list`` does not load the harness.
"""

import importlib

_LAZY = {"run": "benchmarks.harness", "RunConfig": "benchmarks.config", "Job": "benchmarks.jobs",
         "SUITES": "benchmarks.suites", "Part": "benchmarks.suites",
         "Suite": "benchmarks.suites", "get_suite": "benchmarks.suites",
         "register": "benchmarks.suites"}
__all__ = ["run", "RunConfig", "Job", "SUITES", "Suite", "Part", "get_suite", "register"]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'benchmarks' has no attribute {name!r}")
