"""The retrieval server's command-line arguments, declared once for ``tir-envs serve retrieval``
(``serve_cli``) and the server's own ``python -m tir_envs.tools.search.server``."""

from __future__ import annotations

import argparse

LOOPBACK = "127.0.0.1"


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
    parser.add_argument("--ready-file", default=None, help=argparse.SUPPRESS)
