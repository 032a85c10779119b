"""``tir-envs serve retrieval --index idx/``: share one index over HTTP (see ``server.py``).

The arguments are declared in ``serve_args`` (which the server's own ``main`` reads too) and the
server imported only when it runs, so building the command line (``tir-envs --help``) does not
load asyncio and the HTTP stack.
"""

from __future__ import annotations

import argparse

from tir_envs.tools.search.serve_args import add_arguments


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("serve", help="run a server (retrieval)")
    sub = parser.add_subparsers(dest="serve_command", metavar="SERVER", required=True)
    retrieval = sub.add_parser("retrieval", help="serve a search index over HTTP "
                                                 "(POST /retrieve, GET /health)")
    add_arguments(retrieval)
    retrieval.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from tir_envs.tools.search.server import run
    return run(args)
