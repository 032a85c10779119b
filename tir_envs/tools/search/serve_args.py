"""The retrieval server's command-line arguments, declared once for ``tir-envs serve retrieval``
(``serve_cli``) and the server's own ``python -m tir_envs.tools.search.server``."""

from __future__ import annotations

import argparse

LOOPBACK = "127.0.0.1"
#: requests searched or queued at once before the server answers 503 (overloaded)
MAX_PENDING = 256


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--index", required=True,
                        help="index folder (built by `tir-envs index build`, or any Lucene index)")
    parser.add_argument("--host", default=LOOPBACK,
                        help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=8000, help="port (0: any free port)")
    parser.add_argument("--topk", type=int, default=3, help="documents per query by default")
    parser.add_argument("--threads", type=int, default=1,
                        help="search threads per batch (Lucene backend)")
    parser.add_argument("--max-pending", type=int, default=MAX_PENDING,
                        help="requests searched or queued at once; past it the server answers "
                             "503 overloaded at once (back-pressure)")
    parser.add_argument("--batching", action="store_true",
                        help="search requests that wait for a free search lane together, as "
                             "one batch search (measured slower over Lucene: docs/search.md)")
    parser.add_argument("--workers", type=int, default=1,
                        help="server processes on the one port, sharing the index through mmap")
    parser.add_argument("--mmap", action="store_true",
                        help="bm25, dense: memory-map the index instead of loading it (Lucene "
                             "always maps its files)")
    parser.add_argument("--replicas", type=int, default=0,
                        help="serve the index from this many replicas on a Ray cluster's nodes "
                             "(one per node first); prints their comma-separated URLs for "
                             "index=")
    parser.add_argument("--ray", default=None, metavar="ADDRESS",
                        help="with --replicas: the Ray cluster to join (auto, ray://host:10001; "
                             "default: a local instance)")
    parser.add_argument("--replica-cpus", type=float, default=1,
                        help="with --replicas: CPUs each replica reserves on its node")
    parser.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--ready-file", default=None, help=argparse.SUPPRESS)
