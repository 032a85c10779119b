"""A retriever that asks a retrieval server over HTTP (``tir-envs serve retrieval``).

Speaks the Search-R1 retrieval-server protocol: ``POST /retrieve`` with
``{"queries": [...], "topk": k, "return_scores": true}`` answered by
``{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}``, so it also works
against Search-R1's own server.  Standard library only; each thread keeps one keep-alive
connection.  A server that is down or answers garbage raises ``RetrieverError``
(an infrastructure failure, never the model's fault); one that does not answer within
``timeout_s`` raises ``RetrieverTimeout``, one that is overloaded (503) ``RetrieverOverloaded``.
Neither is retried: a retry would only add load to a server that is already behind.
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse
from typing import Any, Sequence

from tir_envs.tools.search.retriever import (Hit, Retriever, RetrieverError,
                                             RetrieverOverloaded, RetrieverTimeout, check_k)


def _reason(data: bytes) -> str:
    """The ``reason`` of a JSON error body, else its first bytes."""
    try:
        body = json.loads(data)
        return str(body.get("reason") or body.get("error"))
    except (json.JSONDecodeError, AttributeError):
        return data[:300].decode(errors="replace")


class HttpRetriever(Retriever):
    """Client of the retrieval server at ``url`` (e.g. ``http://127.0.0.1:8000``)."""

    backend = "http"
    #: threads for ``asearch``: each mostly waits on its socket, and one thread per concurrent
    #: search lets 64 rollouts share a server without queueing in the client
    async_workers = 64

    def __init__(self, url: str, timeout_s: float = 30.0):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must look like http://host:port, got {url!r}")
        self.url = url.rstrip("/")
        self._scheme, self._host, self._port = parts.scheme, parts.hostname, parts.port
        base = parts.path.rstrip("/")
        self._base = base[:-len("/retrieve")] if base.endswith("/retrieve") else base
        self.timeout_s = timeout_s
        self._local = threading.local()
        self._info: dict[str, Any] | None = None

    # -- HTTP -----------------------------------------------------------------------------
    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = (http.client.HTTPSConnection if self._scheme == "https"
                   else http.client.HTTPConnection)
            conn = cls(self._host, self._port, timeout=self.timeout_s)
            self._local.conn = conn
        return conn

    def _request(self, method: str, path: str, payload: Any = None) -> Any:
        body = None if payload is None else json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"} if body else {}
        for attempt in (0, 1):  # one retry: a kept-alive connection may have been closed
            conn = self._connection()
            try:
                conn.request(method, self._base + path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
            except TimeoutError as exc:
                conn.close()
                self._local.conn = None
                raise RetrieverTimeout(f"retrieval server {self.url} did not answer within "
                                       f"{self.timeout_s:g} s") from exc
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                self._local.conn = None
                if attempt:
                    raise RetrieverError(f"retrieval server {self.url} is unreachable: "
                                         f"{type(exc).__name__}: {exc}") from exc
                continue
            if resp.status == 503:
                raise RetrieverOverloaded(f"retrieval server {self.url} is overloaded: "
                                          f"{_reason(data)}")
            if resp.status != 200:
                raise RetrieverError(f"retrieval server {self.url} answered {resp.status}: "
                                     f"{data[:300].decode(errors='replace')}")
            try:
                return json.loads(data)
            except json.JSONDecodeError as exc:
                raise RetrieverError(f"retrieval server {self.url} sent invalid JSON") from exc

    def info(self) -> dict[str, Any]:
        """The server's ``/health`` answer (backend, num_docs, ...)."""
        if self._info is None:
            self._info = self._request("GET", "/health")
        return self._info

    # -- Retriever ------------------------------------------------------------------------
    @property
    def num_docs(self) -> int:
        return int(self.info().get("num_docs", -1))

    def batch_search(self, queries: Sequence[str], k: int = 3,
                     threads: int = 1) -> list[list[Hit]]:
        check_k(k)
        if not queries:
            return []
        answer = self._request("POST", "/retrieve", {"queries": list(queries), "topk": k,
                                                     "return_scores": True})
        result = answer.get("result") if isinstance(answer, dict) else None
        if not isinstance(result, list) or len(result) != len(queries):
            raise RetrieverError(f"retrieval server {self.url} sent a malformed answer "
                                 f"(expected 'result' with {len(queries)} lists)")
        return [[Hit.from_dict(item) for item in hits] for hits in result]

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend, "url": self.url, "server": self.info()}

    def close(self) -> None:
        super().close()
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
