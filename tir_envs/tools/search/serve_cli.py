"""``tir-envs serve retrieval --index idx/``: share one index over HTTP (see ``server.py``).

The arguments are declared here and the server imported only when it runs, so building the
command line (``tir-envs --help``) does not load asyncio and the HTTP stack.
"""

from __future__ import annotations

import argparse

LOOPBACK = "127.0.0.1"


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("serve", help="run a server (retrieval)")
    sub = parser.add_subparsers(dest="serve_command", metavar="SERVER", required=True)
    retrieval = sub.add_parser("retrieval", help="serve a search index over HTTP "
                                                 "(POST /retrieve, GET /health)")
    add_arguments(retrieval)
    retrieval.set_defaults(func=_run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--index", required=True,
                        help="index folder (built by `tir-envs index build`, or any Lucene index)")
    parser.add_argument("--host", default=LOOPBACK,
                        help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=8000, help="port (0: any free port)")
    parser.add_argument("--topk", type=int, default=3, help="documents per query by default")
    parser.add_argument("--threads", type=int, default=1,
                        help="search threads per batch (Lucene backend)")
    parser.add_argument("--max-pending", type=int, default=256,
                        help="requests searched or queued at once; past it the server answers "
                             "503 overloaded at once (back-pressure)")
    parser.add_argument("--batching", action="store_true",
                        help="search requests that wait for a free search lane together, as "
                             "one batch search (measured slower over Lucene: docs/search.md)")
    parser.add_argument("--workers", type=int, default=1,
                        help="server processes on the one port, sharing the index through mmap")
    parser.add_argument("--mmap", action="store_true",
                        help="bm25: memory-map the index instead of loading it (Lucene always "
                             "maps its files)")
    parser.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--ready-file", default=None, help=argparse.SUPPRESS)


def _run(args: argparse.Namespace) -> int:
    from tir_envs.tools.search.server import run
    return run(args)
