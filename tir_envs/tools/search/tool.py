"""``SearchTool``: the ``search`` tool an environment calls, over any retriever.

The retriever may be given ready, as an index path / URL, or as a zero-argument factory; it is
opened on the first call (on a worker thread: opening can start a JVM or build the default
index), so creating an environment stays instant.  An empty query is the model's error; a
retriever that fails, hangs or cannot be opened is an infrastructure error.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any, Callable, Union

from tir_envs.tools.base import Tool, ToolResult, Status
from tir_envs.tools.search.formatting import format_hits
from tir_envs.tools.search.retriever import Retriever, RetrieverTimeout, check_k

RetrieverSource = Union[Retriever, str, Path, Callable[[], Retriever]]


class SearchTool(Tool):
    """Top-``topk`` documents for ``{"query": ...}``, formatted the Search-R1 way."""

    name = "search"

    def __init__(self, retriever: RetrieverSource, topk: int = 3, timeout_s: float = 30.0):
        self.topk = check_k(topk)
        self.timeout_s = float(timeout_s)
        self._source = retriever
        self._retriever = retriever if isinstance(retriever, Retriever) else None
        self._lock = threading.Lock()

    @property
    def retriever(self) -> Retriever:
        """The retriever, opened now if it was not yet (blocking)."""
        with self._lock:
            if self._retriever is None:
                self._retriever = self._open()
            return self._retriever

    def _open(self) -> Retriever:
        if callable(self._source):
            return self._source()
        from tir_envs.tools.search.backends import shared_retriever
        return shared_retriever(self._source)

    async def call(self, arguments: dict[str, Any], session: Any = None) -> ToolResult:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return ToolResult("Error: the search query is empty; write the query between "
                              "<search> and </search>.", Status.ERROR)
        query = query.strip()
        try:
            retriever = self._retriever or await asyncio.to_thread(lambda: self.retriever)
            hits = await asyncio.wait_for(retriever.asearch(query, self.topk), self.timeout_s)
        except (asyncio.TimeoutError, RetrieverTimeout) as exc:
            what = str(exc) if isinstance(exc, RetrieverTimeout) else \
                f"the search engine did not answer within {self.timeout_s:g} s"
            return ToolResult.infra(what, timeout=True)
        except Exception as exc:  # noqa: BLE001 - any retriever failure is infrastructure
            return ToolResult.infra(f"the search engine failed ({type(exc).__name__}: {exc})")
        return ToolResult(format_hits(hits), Status.OK,
                          metadata={"query": query, "docids": [h.docid for h in hits]})

    async def warm_up(self) -> None:
        """Open the retriever (JVM, index) and run one query, off the event loop: a cold
        index otherwise lands seconds on the first episodes' calls and latency figures."""
        retriever = self._retriever or await asyncio.to_thread(lambda: self.retriever)
        await asyncio.wait_for(retriever.asearch("warm up", 1), self.timeout_s)

    def close(self) -> None:
        """Nothing to release here: shared retrievers live for the process."""
