"""The retrieval server under load: back-pressure (503 overloaded), client timeouts, floods.

The server is the real aiohttp application; the gated retriever under it holds every search
until the test releases it, so "the queue is full" and "the server is stuck" are states the
test creates, not races it hopes to win.  The flood test uses the real server subprocess.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import threading
import urllib.error
import urllib.request

import pytest

from tests.search_helpers import SMALL_DOCS, SMALL_QUERIES, small_index
from tir_envs.envs.search import SearchEnv
from tir_envs.tools.base import Status
from tir_envs.tools.search import SearchTool, open_retriever
from tir_envs.tools.search.bm25 import BM25Retriever
from tir_envs.tools.search.client import HttpRetriever
from tir_envs.tools.search.retriever import Retriever, RetrieverOverloaded, RetrieverTimeout
from tir_envs.tools.search.server import RetrievalServer, make_app

pytest.importorskip("aiohttp")


class GatedRetriever(Retriever):
    """A real BM25 index whose searches wait until ``gate`` is set."""

    backend = "gated"
    async_workers = 2  # two search lanes

    def __init__(self):
        self.inner = BM25Retriever.from_docs(SMALL_DOCS)
        self.gate = threading.Event()

    @property
    def num_docs(self):
        return self.inner.num_docs

    def batch_search(self, queries, k=3, threads=1):
        self.gate.wait(30)
        return self.inner.batch_search(queries, k)


class InProcessServer:
    """``make_app`` served on a background event loop at a free loopback port."""

    def __init__(self, retriever: Retriever, max_pending: int, batching: bool = False):
        from aiohttp import web
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runner = web.AppRunner(make_app(retriever, max_pending=max_pending,
                                                batching=batching))

        async def start():
            await self.runner.setup()
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            await site.start()
            return site._server.sockets[0].getsockname()[1]

        port = asyncio.run_coroutine_threadsafe(start(), self.loop).result(30)
        self.url = f"http://127.0.0.1:{port}"

    def health(self) -> dict:
        with urllib.request.urlopen(self.url + "/health", timeout=10) as resp:
            return json.loads(resp.read())

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def gated():
    retriever = GatedRetriever()
    server = InProcessServer(retriever, max_pending=2)
    try:
        yield retriever, server
    finally:
        retriever.gate.set()
        server.close()


def _wait_pending(server: InProcessServer, n: int) -> None:
    for _ in range(500):
        if server.health()["pending"] == n:
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"the server never had {n} pending requests: {server.health()}")


def test_a_full_queue_answers_503_overloaded_and_recovers(gated, qwen_tok):
    retriever, server = gated
    pool = concurrent.futures.ThreadPoolExecutor(2)
    held = [pool.submit(HttpRetriever(server.url).search, q, 1)
            for q in ("capital of France", "highest mountain")]
    _wait_pending(server, 2)

    req = urllib.request.Request(server.url + "/retrieve", method="POST",
                                 data=json.dumps({"queries": ["x"]}).encode())
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=10)
    assert err.value.code == 503 and err.value.headers["Retry-After"] == "1"
    body = json.loads(err.value.read())
    assert body["error"] == "overloaded" and body["pending"] == 2 and body["max_pending"] == 2
    assert "--max-pending" in body["reason"]

    client = HttpRetriever(server.url)
    with pytest.raises(RetrieverOverloaded, match="overloaded: 2 requests"):
        client.search("capital of France")
    result = asyncio.run(SearchTool(client).call({"query": "capital of France"}))
    assert result.status == Status.INFRA_ERROR and "overloaded" in result.text

    env = SearchEnv(tokenizer=qwen_tok, retriever=client,
                    tasks=[{"question": "Capital of France", "answer": "Paris"}])
    env.reset(seed=0)
    obs, _, _, _, info = env.step(env.codec.encode("<search>capital of France</search>"))
    assert info["turn"].status == "infra_error"
    assert "overloaded" in env.codec.decode(obs["tokens"])
    _, reward, _, _, info = env.step(env.codec.encode("<answer>Paris</answer>"))
    assert info["trajectory"].infra_failed

    retriever.gate.set()  # the held requests complete with their own answers
    assert [f.result(30)[0].docid for f in held] == ["paris", "everest"]
    assert server.health()["pending"] == 0 and server.health()["rejected"] == 4
    assert client.search("highest mountain", 1)[0].docid == "everest"


def test_a_client_timeout_is_a_host_observed_infra_timeout(gated, qwen_tok):
    retriever, server = gated
    client = HttpRetriever(server.url, timeout_s=0.5)
    with pytest.raises(RetrieverTimeout, match="did not answer within 0.5 s"):
        client.search("capital of France")
    result = asyncio.run(SearchTool(client, timeout_s=30).call({"query": "capital"}))
    assert result.status == Status.INFRA_ERROR and result.metadata["timeout"] is True

    env = SearchEnv(tokenizer=qwen_tok, retriever=client,
                    tasks=[{"question": "Capital of France", "answer": "Paris"}])
    env.reset(seed=0)
    _, _, _, _, info = env.step(env.codec.encode("<search>capital of France</search>"))
    assert info["turn"].status == "infra_error"
    _, _, _, _, info = env.step(env.codec.encode("<answer>Paris</answer>"))
    assert info["trajectory"].infra_failed


def test_concurrent_requests_are_searched_in_one_batch_with_their_own_answers():
    retriever = GatedRetriever()
    server = InProcessServer(retriever, max_pending=50, batching=True)
    try:
        pool = concurrent.futures.ThreadPoolExecutor(8)
        first = [pool.submit(HttpRetriever(server.url).search, q, 3)
                 for q in ("capital of France", "highest mountain")]
        _wait_pending(server, 2)  # both search lanes are busy: the next requests wait
        waiting = list(SMALL_QUERIES) * 2
        rest = [pool.submit(HttpRetriever(server.url).search, q, 3) for q in waiting[:5]]
        odd_k = pool.submit(HttpRetriever(server.url).search, waiting[5], 1)
        _wait_pending(server, 8)
        retriever.gate.set()
        assert [f.result(30)[0].docid for f in first] == ["paris", "everest"]
        for q, f in zip(waiting, rest):
            assert f.result(30) == retriever.inner.search(q, 3)
            assert f.result()[0].docid == SMALL_QUERIES[q]
        assert odd_k.result(30) == retriever.inner.search(waiting[5], 1)
        assert odd_k.result()[0].docid == SMALL_QUERIES[waiting[5]]
        health = server.health()
        # two lone requests, then the five waiting k=3 requests as one batch, the k=1 alone
        assert (health["batches"], health["batched_queries"]) == (4, 8)
    finally:
        retriever.gate.set()
        server.close()


def test_max_pending_is_checked():
    with pytest.raises(ValueError, match="max_pending must be a positive integer"):
        make_app(GatedRetriever(), max_pending=0)


def test_a_flooded_server_rejects_some_and_answers_the_rest_correctly():
    """16 clients at once, each with a 2000-query batch, against max_pending=1: some are
    refused with 503; every answer that comes back equals a direct search of its queries."""
    index = small_index("lucene")
    queries = list(SMALL_QUERIES) * 400
    with open_retriever(index) as local:
        expected = [[h.docid for h in hits] for hits in local.batch_search(queries, 3)]
    with RetrievalServer(index, max_pending=1) as server:
        start = threading.Barrier(16)

        def one(i: int):
            client = HttpRetriever(server.url, timeout_s=120)
            mine = queries[i:] + queries[:i]  # each client its own order: no mixed answers
            start.wait()
            try:
                hits = client.batch_search(mine, 3)
            except RetrieverOverloaded:
                return i, None
            return i, [[h.docid for h in row] for row in hits]

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            results = list(pool.map(one, range(16)))
        health = server.health()
    answered = [(i, r) for i, r in results if r is not None]
    assert answered and len(answered) < 16
    for i, got in answered:
        assert got == expected[i:] + expected[:i]
    assert health["rejected"] == 16 - len(answered) and health["pending"] == 0


@pytest.mark.parametrize("backend", ["bm25", "lucene"])
def test_several_workers_share_one_port_and_one_mapped_index(backend):
    index = small_index(backend)
    with open_retriever(index) as local:
        expected = {q: [h.docid for h in local.search(q, 3)] for q in SMALL_QUERIES}
    with RetrievalServer(index, workers=2, mmap=True) as server:
        pids = set()
        for i in range(40):  # a new connection each time: the kernel spreads them
            with urllib.request.urlopen(server.url + "/health", timeout=30) as resp:
                pids.add(json.loads(resp.read())["pid"])
        assert len(pids) == 2
        for q, docids in expected.items():
            assert [h.docid for h in HttpRetriever(server.url).search(q, 3)] == docids
        supervisor = server._proc
    assert supervisor.poll() is not None
    for pid in pids:  # the workers stopped with the supervisor
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            threading.Event().wait(0.05)
        else:
            raise AssertionError(f"worker {pid} outlived the server")
