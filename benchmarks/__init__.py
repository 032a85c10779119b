"""Benchmark suites, the harness that runs them, metrics and reports (docs/benchmarks.md).

``tir_envs.bench.run(["math500"], "vllm:/models/x", k=8, out="runs/x")`` (or
``tir_envs.bench.run(RunConfig(...))``) evaluates a policy and writes a run folder; ``tir-envs
bench`` is the same from the command line.  The names are imported on first use, so
``tir-envs bench list`` does not load the harness.
"""

import importlib

_LAZY = {"run": "tir_envs.bench.harness", "RunConfig": "tir_envs.bench.config", "Job": "tir_envs.bench.jobs",
         "SUITES": "tir_envs.bench.suites", "Part": "tir_envs.bench.suites",
         "Suite": "tir_envs.bench.suites", "get_suite": "tir_envs.bench.suites",
         "register": "tir_envs.bench.suites"}
__all__ = ["run", "RunConfig", "Job", "SUITES", "Suite", "Part", "get_suite", "register"]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'benchmarks' has no attribute {name!r}")
