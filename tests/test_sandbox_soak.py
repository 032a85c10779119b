"""Soak (opt-in: ``pytest -m soak``): 10,000 sessions through the local sandbox with no leaked
processes or file descriptors and no unbounded memory growth (see
``benchmarks/perf/sandbox_soak.py``, which this runs and which also runs on its own)."""

from __future__ import annotations

import asyncio
import json

import pytest

from tir_envs.bench.perf.sandbox_soak import soak


@pytest.mark.soak
@pytest.mark.timeout(3600)
def test_ten_thousand_sessions_leave_nothing_behind():
    report = asyncio.run(soak(sessions=10_000, concurrency=32))
    assert report["sessions"] == 10_000
    assert report["ok"], json.dumps({k: report[k] for k in ("checks", "failures", "samples")},
                                    indent=1)
