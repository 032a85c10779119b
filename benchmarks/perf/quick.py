"""The quick mode every performance script has: ``PERF_QUICK=1`` shrinks its workload to a few
seconds, so ``make perf-smoke`` (run by ``make test``) executes each script end to end and a
script that no longer runs fails CI.  Quick figures prove the script works, not how fast."""

from __future__ import annotations

import os
from typing import TypeVar

T = TypeVar("T")

QUICK = os.environ.get("PERF_QUICK", "") not in ("", "0")


def pick(full: T, quick: T) -> T:
    """``quick`` under ``PERF_QUICK=1``, else ``full``."""
    return quick if QUICK else full
