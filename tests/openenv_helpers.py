"""Servers for the OpenEnv tests: started as subprocesses, waited for until they answer."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CAPITALS_MODULE = '''
CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Italy": "Rome"}


def capital(country: str) -> str:
    """The capital city of a country.

    Args:
        country: the country's English name.
    """
    if country not in CAPITALS:
        raise KeyError(f"no capital known for {country!r}")
    return CAPITALS[country]
'''

TASKS = [{"question": "What is the capital of France?", "answer": "Paris"},
         {"question": "What is the capital of Japan?", "answer": "Tokyo"}]


def env_with(folder: Path) -> dict[str, str]:
    return {**os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(folder),
                                           os.environ.get("PYTHONPATH", "")])}


def start(argv: list[str], folder: Path, port: int, timeout: float = 120.0
          ) -> subprocess.Popen:
    """Run ``argv`` (a server on ``port``) and wait until ``/health`` answers."""
    log = open(folder / f"server-{port}.log", "w")
    proc = subprocess.Popen(argv, env=env_with(folder), cwd=folder, stdout=log, stderr=log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode}: "
                               f"{(folder / f'server-{port}.log').read_text()[-2000:]}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the server did not answer /health in time")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
