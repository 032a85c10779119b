"""``tir-envs serve retrieval --index idx/``: share one index over HTTP (see ``server.py``)."""

from __future__ import annotations


def add_parser(subparsers) -> None:
    from tir_envs.tools.search.server import add_arguments, run

    parser = subparsers.add_parser("serve", help="run a server (retrieval)")
    sub = parser.add_subparsers(dest="serve_command", metavar="SERVER", required=True)
    retrieval = sub.add_parser("retrieval", help="serve a search index over HTTP "
                                                 "(POST /retrieve, GET /health)")
    add_arguments(retrieval)
    retrieval.set_defaults(func=run)
