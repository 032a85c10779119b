"""``RetrievalServer``: the retrieval server (``server.py``) as a subprocess a test, a benchmark
or a Ray replica starts and always stops.

It binds 127.0.0.1 (or ``host``) on a free port, waits until the server has written its URL,
and on ``stop`` terminates it (then kills it after 10 s); the server dies with its starter even
on SIGKILL.  A server that fails to start raises with the tail of its log.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from tir_envs.tools.search.lucene import die_with_parent
from tir_envs.tools.search.serve_args import LOOPBACK, MAX_PENDING


class RetrievalServer:
    """A retrieval server subprocess on 127.0.0.1 (see the module docstring); ``host``: the
    address to bind instead (a cluster node's own, for clients on other nodes)."""

    def __init__(self, index: str | Path, port: int = 0, topk: int = 3, threads: int = 1,
                 startup_timeout_s: float = 120.0, max_pending: int = MAX_PENDING,
                 batching: bool = False, workers: int = 1, mmap: bool = False,
                 host: str = LOOPBACK):
        self.index, self.port, self.topk, self.threads = str(index), port, topk, threads
        self.host = host
        self.max_pending, self.batching = max_pending, batching
        self.workers, self.mmap = workers, mmap
        self.startup_timeout_s = startup_timeout_s
        self.url: str | None = None
        self._proc: subprocess.Popen | None = None
        self._dir: tempfile.TemporaryDirectory | None = None

    def start(self) -> "RetrievalServer":
        if self._proc is not None:
            return self
        self._dir = tempfile.TemporaryDirectory(prefix="tir-retrieval-")
        ready, log = Path(self._dir.name) / "url", Path(self._dir.name) / "log"
        cmd = [sys.executable, "-m", "tir_envs.tools.search.server", "--index", self.index,
               "--host", self.host, "--port", str(self.port), "--topk", str(self.topk),
               "--threads", str(self.threads), "--max-pending", str(self.max_pending),
               "--ready-file", str(ready), "--workers", str(self.workers)] \
            + (["--batching"] if self.batching else []) + (["--mmap"] if self.mmap else [])
        with open(log, "wb") as out:
            self._proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
        deadline = time.monotonic() + self.startup_timeout_s
        while not ready.exists():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-3000:]
                self.stop()
                raise RuntimeError(f"the retrieval server for {self.index} did not start:\n{tail}")
            time.sleep(0.05)
        self.url = ready.read_text().strip()
        return self

    def health(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.url}/health", timeout=10) as resp:
            return json.loads(resp.read())

    def stop(self) -> None:
        """Terminate (then kill, after 10 s) the server.  Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> "RetrievalServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __del__(self) -> None:
        try:
            self.stop()
        except Exception:  # noqa: BLE001 - interpreter shutdown: best effort only
            pass
