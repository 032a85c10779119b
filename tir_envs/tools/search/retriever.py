"""The retriever contract every search backend implements, and the hit it returns.

A backend answers ``search(query, k)`` and ``batch_search(queries, k)`` with ``Hit`` lists,
best first.  A hit carries the document's ``contents`` in the Search-R1 / pyserini layout:
the first line is the title, the rest the text.  ``asearch`` lets an event loop ask without
blocking: it runs ``search`` on the retriever's own small thread pool, reused across event
loops (a JVM attaches each thread that calls it, so their number must stay bounded).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from dataclasses import dataclass
from typing import Any, Sequence

from tir_envs.validation import check_positive_int


class RetrieverError(RuntimeError):
    """The retriever itself failed (index missing, JVM or server down): infrastructure."""


class RetrieverTimeout(RetrieverError):
    """The retriever did not answer in time (an overloaded or stuck server): infrastructure."""


class RetrieverOverloaded(RetrieverError):
    """The retrieval server refused the request because its queue is full (HTTP 503)."""


@dataclass(frozen=True)
class Hit:
    """One retrieved document: id, score and ``contents`` (title line, then text)."""

    docid: str
    score: float
    contents: str

    @property
    def title(self) -> str:
        """The title line, without the quotes the wiki-18 corpus puts around it."""
        first = self.contents.split("\n", 1)[0].strip()
        if len(first) >= 2 and first[0] == first[-1] == '"':
            return first[1:-1]
        return first

    @property
    def text(self) -> str:
        parts = self.contents.split("\n", 1)
        return parts[1] if len(parts) > 1 else ""

    def to_dict(self) -> dict[str, Any]:
        """The Search-R1 retrieval-server layout: ``{"document": {...}, "score": s}``."""
        return {"document": {"id": self.docid, "contents": self.contents}, "score": self.score}

    @classmethod
    def from_dict(cls, item: dict[str, Any]) -> "Hit":
        doc = item.get("document", item)
        return cls(str(doc.get("id", "")), float(item.get("score", 0.0)),
                   contents_of(doc))


def contents_of(doc: dict[str, Any]) -> str:
    """The ``contents`` string of a corpus record or stored document.

    ``contents`` is used as is (pyserini, FlashRAG, Search-R1 wiki-18); otherwise ``title`` and
    ``text`` become ``'"title"\\ntext'``, the wiki-18 layout, so results read the same.
    """
    if isinstance(doc.get("contents"), str):
        return doc["contents"]
    if isinstance(doc.get("text"), str):
        title = doc.get("title")
        return f'"{title}"\n{doc["text"]}' if title else doc["text"]
    raise ValueError(f"a document needs 'contents' or 'text' (and optionally 'title'); "
                     f"got fields {sorted(doc)}")


def contents_from_raw(raw: str | None, fallback: str | None = None) -> str:
    """``contents`` from a Lucene document's stored raw JSON (or its plain stored text)."""
    if raw:
        try:
            doc = json.loads(raw)
        except json.JSONDecodeError:
            return raw
        if isinstance(doc, dict):
            try:
                return contents_of(doc)
            except ValueError:
                pass
        return raw
    return fallback or ""


class Retriever:
    """Base class of the search backends (see the module docstring)."""

    #: backend name, as used by ``open_retriever(..., backend=...)`` and the index manifest
    backend: str = "base"
    #: threads that run blocking searches for ``asearch`` / ``abatch_search``
    async_workers: int = 4
    _pool: concurrent.futures.ThreadPoolExecutor | None = None
    _pool_lock = threading.Lock()

    @property
    def num_docs(self) -> int:
        raise NotImplementedError

    def search(self, query: str, k: int = 3) -> list[Hit]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int = 3,
                     threads: int = 1) -> list[list[Hit]]:
        """Results for many queries at once (backends override this with a faster path)."""
        return [self.search(q, k) for q in queries]

    async def asearch(self, query: str, k: int = 3) -> list[Hit]:
        """``search`` without blocking the event loop (on the retriever's thread pool)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor(), self.search,
                                                                query, k)

    async def abatch_search(self, queries: Sequence[str], k: int = 3,
                            threads: int = 1) -> list[list[Hit]]:
        return await asyncio.get_running_loop().run_in_executor(
            self._executor(), self.batch_search, list(queries), k, threads)

    @property
    def thread_prefix(self) -> str:
        """Name prefix of this retriever's pool threads."""
        return f"tir-search-{self.backend}-{id(self):x}"

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._pool is None:
            with self._pool_lock:
                if self._pool is None:
                    self._pool = concurrent.futures.ThreadPoolExecutor(
                        self.async_workers, thread_name_prefix=self.thread_prefix)
        return self._pool

    def describe(self) -> dict[str, Any]:
        """A short JSON-able description (backend, size) for logs and the server's /health."""
        return {"backend": self.backend, "num_docs": self.num_docs}

    def close(self) -> None:
        """Release what the backend holds (subclasses call this too).  Idempotent."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)

    def __enter__(self) -> "Retriever":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def check_k(k: Any) -> int:
    check_positive_int(k=k, hint="k is top-k, the documents per search")
    return k
