"""Request batching across clients: concurrent searches answered by one ``batch_search``.

Many rollouts send one query each.  Searching them one by one pays the per-call overhead
(an executor hop, for Lucene a JNI round trip) per query and keeps at most one query per
search thread busy.  The batcher queues them instead and, whenever a search lane is free,
takes everything waiting (up to ``max_batch`` queries of one ``k``) as one batch.  There is no
timer: an idle server answers a lone query at once, a busy one batches what piled up while it
worked, so batching adds no latency of its own.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Sequence

from tir_envs.tools.search.retriever import Hit, Retriever


@dataclass
class _Request:
    queries: list[str]
    k: int
    done: asyncio.Future = field(repr=False)


class Batcher:
    """Queue of search requests served in batches by ``lanes`` concurrent ``batch_search``."""

    def __init__(self, retriever: Retriever, threads: int = 1, max_batch: int = 1024,
                 lanes: int | None = None):
        self.retriever, self.threads, self.max_batch = retriever, threads, max_batch
        #: concurrent batches: by default as many as the retriever has async worker threads,
        #: the concurrency the server has without batching
        self.lanes = lanes or retriever.async_workers
        self._waiting: list[_Request] = []
        self._busy = 0
        #: how many batches ran and how many queries they held (for /health and benchmarks)
        self.batches = 0
        self.batched_queries = 0

    async def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """The hits of ``queries`` at ``k``, searched together with whatever else waits."""
        request = _Request(list(queries), k, asyncio.get_running_loop().create_future())
        self._waiting.append(request)
        self._kick()
        return await request.done

    def _kick(self) -> None:
        while self._waiting and self._busy < self.lanes:
            self._busy += 1
            asyncio.get_running_loop().create_task(self._run(self._take()))

    def _take(self) -> list[_Request]:
        """The oldest request and every later one with its ``k``, up to ``max_batch`` queries
        (a single request larger than that still goes alone)."""
        first = self._waiting.pop(0)
        batch, size, rest = [first], len(first.queries), []
        for request in self._waiting:
            if request.k == first.k and size + len(request.queries) <= self.max_batch:
                batch.append(request)
                size += len(request.queries)
            else:
                rest.append(request)
        self._waiting = rest
        return batch

    async def _run(self, batch: list[_Request]) -> None:
        queries = [q for request in batch for q in request.queries]
        try:
            results = await self.retriever.abatch_search(queries, batch[0].k, self.threads)
        except Exception as exc:  # noqa: BLE001 - every request of the batch gets the error
            for request in batch:
                if not request.done.done():
                    request.done.set_exception(exc)
        else:
            self.batches += 1
            self.batched_queries += len(queries)
            start = 0
            for request in batch:
                end = start + len(request.queries)
                if not request.done.done():
                    request.done.set_result(results[start:end])
                start = end
        finally:
            self._busy -= 1
            self._kick()
