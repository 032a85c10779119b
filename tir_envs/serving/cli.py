"""``tir-envs serve``: ``retrieval`` (a search index over HTTP), ``mcp`` (the project's tools as
an MCP server), ``openenv`` (any registered env as an OpenEnv server), ``gateway`` (an OpenAI-
and Anthropic-compatible server over a policy, for training black-box agents)."""

from __future__ import annotations

import argparse

from tir_envs.serving import guard
from tir_envs.tools.search import serve_cli as retrieval_cli

#: seconds a session may stay idle before the server ends it (its env or interpreter freed)
IDLE_S = 600.0


def add_parser(subparsers) -> None:
    """The ``serve`` command; every server is imported only when it runs (``--help`` stays
    fast)."""
    parser = subparsers.add_parser("serve", help="run a server (retrieval, mcp, openenv, "
                                                          "gateway)")
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
    guard.add_arguments(mcp, 8765)
    mcp.add_argument("--max-sessions", type=int, default=32,
                     help="--http: MCP sessions at once (each its own interpreter)")
    mcp.add_argument("--idle-s", type=float, default=IDLE_S,
                     help="--http: seconds before an idle session is ended")
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
    guard.add_arguments(oe, 8000)
    oe.add_argument("--max-sessions", type=int, default=8,
                    help="concurrent WebSocket sessions (each its own env)")
    oe.add_argument("--idle-s", type=float, default=IDLE_S,
                    help="seconds before an idle session is ended (its env closed)")
    oe.set_defaults(func=run_openenv)

    from tir_envs.gateway import cli as gateway_cli  # argparse only: no server imported
    gateway_cli.add_arguments(sub.add_parser(
        "gateway", help="an OpenAI/Anthropic-compatible gateway over a policy: agents' "
                        "calls become token-exact ledgers (docs/gateway.md)"))


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
    config = guard.config_from_args(args) if args.http else None
    if args.max_sessions < 1 or not args.idle_s > 0:
        raise SystemExit("--max-sessions must be >= 1 and --idle-s > 0")
    tools = build_tools(names, timeout_s=args.tool_timeout_s, backend=args.backend,
                        retriever=args.retriever)
    server, table = build_server(tools, databases or None, max_owners=args.max_sessions,
                                 idle_s=args.idle_s)

    async def serve() -> None:
        try:
            if args.http:
                app = server.streamable_http_app(
                    max_request_body_size=config.max_body_bytes, host=args.host,
                    session_idle_timeout=args.idle_s, max_sessions=args.max_sessions)
                await guard.serve_async(app, config, f"MCP tools ({', '.join(names)})")
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
    from tir_envs.registry import import_modules
    from tir_envs.rollout.cli import parse_env_args
    from tir_envs.serving.openenv_server import build_app

    import_modules(args.imports)
    if args.max_sessions < 1:
        raise SystemExit(f"--max-sessions {args.max_sessions}: must be >= 1")
    if not args.idle_s > 0:
        raise SystemExit(f"--idle-s {args.idle_s}: must be > 0")
    config = guard.config_from_args(args)
    app = build_app(args.env, parse_env_args(args.env_arg), args.max_sessions,
                    idle_s=args.idle_s)
    guard.serve(app, config, f"{args.env} over OpenEnv")
    return 0
