"""The retrieval server: one index in one process, shared over HTTP by many trainer processes.

``POST /retrieve`` takes ``{"queries": [...], "topk": k, "return_scores": bool}`` (a single
``"query"`` also works) and answers ``{"result": [[{"document": {"id", "contents"},
"score"}, ...], ...]}``, the Search-R1 server protocol; ``GET /health`` describes the index.
A batch runs as one ``batch_search`` on a worker thread, so the event loop keeps serving.

Back-pressure: at most ``max_pending`` requests are searched or waiting at once; past that the
server answers at once with HTTP 503 and ``{"error": "overloaded", "reason", "pending",
"max_pending"}`` (and ``Retry-After``), instead of letting a queue (and every client's latency)
grow without bound.  The client turns it into an infrastructure error of that one search.
With ``--batching``, concurrent requests are searched together (``batcher.py``); off by
default, because over Lucene it measured slower (docs/search.md).

``RetrievalServer`` (``server_process``) starts it as a subprocess bound to 127.0.0.1 on a free port, waits until it
answers, and always stops it::

    with RetrievalServer("idx/") as server:
        env = SearchEnv(retriever=server.url)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from tir_envs.tools.search.batcher import Batcher
from tir_envs.tools.search.server_process import RetrievalServer  # noqa: F401 - users import it from here
from tir_envs.tools.search.retriever import Retriever
from tir_envs.tools.search.serve_args import LOOPBACK, MAX_PENDING, add_arguments

MAX_BATCH = 4096


class BadRequest(ValueError):
    """A request the server rejects with 400, with the reason."""


def parse_request(body: Any, default_k: int) -> tuple[list[str], int, bool]:
    """``(queries, k, return_scores)`` from a request body, or ``BadRequest``."""
    if not isinstance(body, dict):
        raise BadRequest('the body must be a JSON object like {"queries": ["..."], "topk": 3}')
    queries = body.get("queries", [body["query"]] if "query" in body else None)
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise BadRequest("'queries' must be a list of strings")
    if len(queries) > MAX_BATCH:
        raise BadRequest(f"at most {MAX_BATCH} queries per request, got {len(queries)}")
    k = body.get("topk", default_k)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise BadRequest(f"'topk' must be a positive integer, got {k!r}")
    return queries, k, bool(body.get("return_scores", True))


def make_app(retriever: Retriever, default_k: int = 3, threads: int = 1,
             max_pending: int = MAX_PENDING, batching: bool = False):
    """The aiohttp application serving ``retriever`` (see the module docstring);
    ``batching``: concurrent requests are searched together (``Batcher``)."""
    from aiohttp import web

    if isinstance(max_pending, bool) or not isinstance(max_pending, int) or max_pending < 1:
        raise ValueError(f"max_pending must be a positive integer, got {max_pending!r}")
    load = {"pending": 0, "rejected": 0, "served": 0}
    batcher = Batcher(retriever, threads) if batching else None

    async def retrieve(request: web.Request) -> web.Response:
        try:
            queries, k, scores = parse_request(await request.json(), default_k)
        except (BadRequest, json.JSONDecodeError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        if load["pending"] >= max_pending:
            load["rejected"] += 1
            return web.json_response(
                {"error": "overloaded", "pending": load["pending"], "max_pending": max_pending,
                 "reason": f"{load['pending']} requests are already being searched or queued "
                           f"(limit {max_pending}); retry later, or start the server with a "
                           "higher --max-pending or more replicas"},
                status=503, headers={"Retry-After": "1"})
        load["pending"] += 1
        try:
            results = await (batcher.search(queries, k) if batcher is not None
                             else retriever.abatch_search(queries, k, threads))
        except Exception as exc:  # noqa: BLE001 - reported to the client as a server error
            return web.json_response({"error": f"{type(exc).__name__}: {exc}"}, status=500)
        finally:
            load["pending"] -= 1
        load["served"] += 1
        items = [[_item(h.to_dict(), scores) for h in hits] for hits in results]
        return web.json_response({"result": items})

    async def health(request: web.Request) -> web.Response:
        batches = {"batches": batcher.batches, "batched_queries": batcher.batched_queries} \
            if batcher is not None else {}
        return web.json_response({"status": "ok", "pid": os.getpid(), **retriever.describe(),
                                  "max_pending": max_pending, **load, **batches})

    app = web.Application(client_max_size=64 * 2**20)
    app.add_routes([web.post("/retrieve", retrieve), web.get("/health", health)])
    return app


def _item(d: dict[str, Any], scores: bool) -> dict[str, Any]:
    return d if scores else {"document": d["document"]}


async def serve(retriever: Retriever, host: str = LOOPBACK, port: int = 8000,
                default_k: int = 3, threads: int = 1, ready_file: str | None = None,
                max_pending: int = MAX_PENDING, batching: bool = False,
                reuse_port: bool = False) -> None:
    """Serve until SIGTERM/SIGINT; writes the bound URL to ``ready_file`` once listening.
    ``reuse_port``: share ``port`` with the other workers (``SO_REUSEPORT``)."""
    from aiohttp import web

    runner = web.AppRunner(make_app(retriever, default_k, threads, max_pending, batching),
                           access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_port=reuse_port or None)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # the real port when port=0
    url = f"http://{host}:{bound}"
    print(f"retrieval server ({retriever.backend}, {retriever.num_docs} docs) at {url}",
          flush=True)
    if ready_file:
        tmp = f"{ready_file}.tmp"
        Path(tmp).write_text(url)
        os.replace(tmp, ready_file)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        retriever.close()


def run(args: argparse.Namespace) -> int:
    from tir_envs.tools.search.backends import open_retriever
    from tir_envs.tools.search.corpus import detect_backend

    if args.replicas:
        from tir_envs.tools.search.replicas import run_replicas
        return run_replicas(args)
    if args.workers > 1:
        from tir_envs.tools.search.workers import run_workers
        return run_workers(args)
    options = {"mmap": True} if args.mmap and detect_backend(args.index) in ("bm25", "dense") \
        else {}
    retriever = open_retriever(args.index, **options)
    asyncio.run(serve(retriever, args.host, args.port, args.topk, args.threads, args.ready_file,
                      args.max_pending, args.batching, args.reuse_port))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tir_envs.tools.search.server",
                                     description="Serve a search index over HTTP.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
