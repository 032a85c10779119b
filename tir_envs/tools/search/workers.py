"""Several retrieval-server processes answering on one port, sharing one memory-mapped index.

One Python process serves at most what one core and its GIL allow.  ``--workers N`` starts a
supervisor that reserves the port and N server processes listening on it with
``SO_REUSEPORT``: the kernel spreads incoming connections over them (by connection hash).  Each worker opens the index itself, read
through ``mmap`` (Lucene's default directory; bm25 with ``--mmap``), so the N processes share
one copy of the index in the page cache instead of holding N.  The supervisor stops them all
on SIGTERM/SIGINT, and stops the rest and fails if one dies; they die with it, even on SIGKILL.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tir_envs.tools.search.lucene import die_with_parent


def worker_command(args: argparse.Namespace, port: int, ready: Path) -> list[str]:
    """The command line of one worker listening on ``port`` with ``SO_REUSEPORT``."""
    cmd = [sys.executable, "-m", "tir_envs.tools.search.server", "--index", args.index,
           "--host", args.host, "--port", str(port), "--topk", str(args.topk),
           "--threads", str(args.threads), "--max-pending", str(args.max_pending),
           "--reuse-port", "--ready-file", str(ready)]
    return cmd + (["--batching"] if args.batching else []) + (["--mmap"] if args.mmap else [])


def run_workers(args: argparse.Namespace) -> int:
    """Reserve the port, start ``args.workers`` workers on it, supervise them until a signal."""
    if args.workers < 1:
        raise ValueError(f"--workers must be at least 1, got {args.workers}")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # bound, never listening: it
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)  # holds the port (port 0 too)
    sock.bind((args.host, args.port))
    port = sock.getsockname()[1]
    url = f"http://{args.host}:{port}"
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(1))
    with tempfile.TemporaryDirectory(prefix="tir-retrieval-workers-") as tmp:
        readies = [Path(tmp) / f"ready{i}" for i in range(args.workers)]
        procs = [subprocess.Popen(worker_command(args, port, ready), preexec_fn=die_with_parent,
                                  stdin=subprocess.DEVNULL) for ready in readies]
        try:
            while not all(r.exists() for r in readies):
                if stop or any(p.poll() is not None for p in procs):
                    return 1
                time.sleep(0.05)
            print(f"retrieval server: {args.workers} workers at {url}", flush=True)
            if args.ready_file:
                Path(f"{args.ready_file}.tmp").write_text(url)
                os.replace(f"{args.ready_file}.tmp", args.ready_file)
            while not stop:
                if any(p.poll() is not None for p in procs):
                    print("retrieval server: a worker died; stopping the others",
                          file=sys.stderr, flush=True)
                    return 1
                time.sleep(0.2)
            return 0
        finally:
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            for p in procs:
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            sock.close()
