"""``tir-envs serve``: ``retrieval`` (a search index over HTTP), ``mcp`` (the project's tools as
an MCP server), ``openenv`` (any registered env as an OpenEnv server)."""

from __future__ import annotations

import argparse

from tir_envs.tools.search import serve_cli as retrieval_cli


def add_parser(subparsers) -> None:
    """The ``serve`` command; every server is imported only when it runs (``--help`` stays
    fast)."""
    parser = subparsers.add_parser("serve", help="run a server (retrieval, mcp, openenv)")
    sub = parser.add_subparsers(dest="serve_command", metavar="SERVER", required=True)
    retrieval = sub.add_parser("retrieval", help="serve a search index over HTTP "
                                                 "(POST /retrieve, GET /health)")
    retrieval_cli.add_arguments(retrieval)
    retrieval.set_defaults(func=retrieval_cli._run)

    mcp = sub.add_parser("mcp", help="serve the project's tools over MCP (stdio, or "
                                     "streamable HTTP with --http)")
    mcp.add_argument("--tools", default="python",
                     help="comma-separated: python, search, sql (default python)")
    mcp.add_argument("--http", action="store_true", help="streamable HTTP at /mcp, not stdio")
    mcp.add_argument("--host", default="127.0.0.1", help="--http: address to bind")
    mcp.add_argument("--port", type=int, default=8765, help="--http: port")
    mcp.add_argument("--tool-timeout-s", type=float, help="seconds per call (default: each "
                                                          "tool's own)")
    mcp.add_argument("--backend", default="local", help="python sandbox backend (local, e2b, ray)")
    mcp.add_argument("--retriever", help="search: an index folder or a retrieval-server URL "
                                         "(default: the shipped HotpotQA index)")
    mcp.add_argument("--sql-db", action="append", default=[], metavar="NAME=PATH",
                     help="sql: a database clients may query by NAME (default: the shipped "
                          "Spider databases)")
    mcp.set_defaults(func=run_mcp)

    oe = sub.add_parser("openenv", help="serve a registered env over OpenEnv (HTTP and "
                                        "WebSocket, one env per session)")
    oe.add_argument("env", metavar="ENV_ID", help="a registered env id, e.g. tir/MathCode-v0")
    oe.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                    help="an env constructor argument (VALUE parsed as JSON when it can be)")
    oe.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                    help="import MODULE first (it registers your own env ids)")
    oe.add_argument("--host", default="127.0.0.1", help="address to bind")
    oe.add_argument("--port", type=int, default=8000, help="port")
    oe.add_argument("--max-sessions", type=int, default=8,
                    help="concurrent WebSocket sessions (each its own env)")
    oe.set_defaults(func=run_openenv)


def run_mcp(args: argparse.Namespace) -> int:
    import asyncio
    from pathlib import Path

    from tir_envs.serving.mcp_server import build_server, build_tools

    names = [n.strip() for n in args.tools.split(",") if n.strip()]
    databases = {}
    for pair in args.sql_db:
        key, sep, value = pair.partition("=")
        if not sep or not Path(value).is_file():
            raise SystemExit(f"--sql-db {pair!r}: expected NAME=PATH of an existing database")
        databases[key] = Path(value)
    tools = build_tools(names, timeout_s=args.tool_timeout_s, backend=args.backend,
                        retriever=args.retriever)
    server, table = build_server(tools, databases or None)

    async def serve() -> None:
        try:
            if args.http:
                await server.run_streamable_http_async(host=args.host, port=args.port)
            else:
                await server.run_stdio_async()
        finally:
            await table.close_all()

    try:
        asyncio.run(serve())
    finally:
        for tool in tools.values():
            tool.close()
    return 0


def run_openenv(args: argparse.Namespace) -> int:
    import uvicorn

    from tir_envs.registry import import_modules
    from tir_envs.rollout.cli import parse_env_args
    from tir_envs.serving.openenv_server import build_app

    import_modules(args.imports)
    if args.max_sessions < 1:
        raise SystemExit(f"--max-sessions {args.max_sessions}: must be >= 1")
    app = build_app(args.env, parse_env_args(args.env_arg), args.max_sessions)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
