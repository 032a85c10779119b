"""Servers the perf scripts and the tests start as subprocesses, waited for until they answer.

One way to start a server (``tir-envs serve ...`` or a user's app) on a port and know it is
up: its ``GET /health`` answers.  A server that exits first fails at once with its log's
tail, one that never answers is killed after ``timeout``.
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def env_with(folder: Path) -> dict[str, str]:
    """This environment with the project and ``folder`` (a test's modules) importable."""
    return {**os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(folder),
                                           os.environ.get("PYTHONPATH", "")])}


def start(argv: list[str], folder: Path, port: int, timeout: float = 120.0,
          extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    """Run ``argv`` (a server on ``port``) in ``folder`` and wait until ``/health`` answers;
    its output goes to ``folder/server-PORT.log``."""
    log_path = folder / f"server-{port}.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, env={**env_with(folder), **(extra_env or {})},
                                cwd=folder, stdout=log, stderr=log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode}: "
                               f"{log_path.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"the server did not answer /health in {timeout:g} s")


def stop(proc: subprocess.Popen) -> None:
    """Stop a server ``start`` started (TERM, then KILL after 20 s)."""
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
