"""A retriever over several retrieval servers holding the same index: each search goes to the
replica with the fewest searches in flight from this process (ties in turn).

Past one machine, an index is served by replicas on several nodes (``replicas.py`` starts them
on a Ray cluster; any servers will do), and every client spreads its searches over them.
``open_retriever("http://a:8000,http://b:8000")`` (or ``index=`` of a search env) gives one.

A replica that cannot be reached or is overloaded (503) is skipped for this search: the next
one is asked, so one replica down or behind does not fail episodes while another has room.
A replica that times out is not retried elsewhere (the query may be what is slow, and a retry
only adds load); if every replica fails, the last failure is raised, an infrastructure error.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, Sequence

from tir_envs.tools.search.client import HttpRetriever
from tir_envs.tools.search.retriever import (Hit, Retriever, RetrieverError,
                                             RetrieverTimeout, check_k)


def split_urls(source: str) -> list[str]:
    """The URLs of a comma-separated list (``http://a:8000,http://b:8000``)."""
    return [u.strip() for u in source.split(",") if u.strip()]


class SpreadRetriever(Retriever):
    """Searches spread over the retrieval servers at ``urls`` (see the module docstring)."""

    backend = "spread"
    async_workers = 64

    def __init__(self, urls: Sequence[str], timeout_s: float = 30.0):
        urls = list(urls)
        if not urls:
            raise ValueError("SpreadRetriever needs at least one retrieval-server URL")
        self.replicas = [HttpRetriever(u, timeout_s=timeout_s) for u in urls]
        self.urls = [r.url for r in self.replicas]
        self._in_flight = [0] * len(urls)
        #: searches each replica answered, from this process
        self.answered = [0] * len(urls)
        self._turn = itertools.count()
        self._lock = threading.Lock()

    def _order(self) -> list[int]:
        """Replicas to try, least busy first (ties: in turn), and claim the first."""
        with self._lock:
            start = next(self._turn) % len(self.replicas)
            turn = [(start + i) % len(self.replicas) for i in range(len(self.replicas))]
            return sorted(turn, key=lambda i: self._in_flight[i])

    def batch_search(self, queries: Sequence[str], k: int = 3,
                     threads: int = 1) -> list[list[Hit]]:
        check_k(k)
        if not queries:
            return []
        failure: RetrieverError | None = None
        for i in self._order():
            with self._lock:
                self._in_flight[i] += 1
            try:
                hits = self.replicas[i].batch_search(queries, k, threads)
            except RetrieverTimeout:
                raise
            except RetrieverError as exc:  # unreachable, overloaded (503), a server error
                failure = exc
                continue
            finally:
                with self._lock:
                    self._in_flight[i] -= 1
            with self._lock:
                self.answered[i] += 1
            return hits
        assert failure is not None
        raise failure

    def info(self) -> dict[str, Any]:
        """The ``/health`` of the first replica that answers (they serve one index)."""
        failure: RetrieverError | None = None
        for replica in self.replicas:
            try:
                return replica.info()
            except RetrieverError as exc:
                failure = exc
        assert failure is not None
        raise failure

    @property
    def num_docs(self) -> int:
        return int(self.info().get("num_docs", -1))

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend, "urls": self.urls, "server": self.info(),
                "answered": list(self.answered)}

    def close(self) -> None:
        super().close()
        for r in self.replicas:
            r.close()
