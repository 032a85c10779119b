"""Benchmark suites, the harness that runs them, metrics and reports (docs/benchmarks.md).

``benchmarks.run(["math500"], "vllm:/models/x", k=8, out="runs/x")`` (or
``benchmarks.run(RunConfig(...))``) evaluates a policy and writes a run folder; ``tir-envs
bench`` is the same from the command line.
"""

from benchmarks.config import RunConfig
from benchmarks.harness import run
from benchmarks.jobs import Job
from benchmarks.suites import SUITES, Part, Suite, get_suite, register

__all__ = ["run", "RunConfig", "Job", "SUITES", "Suite", "Part", "get_suite", "register"]
