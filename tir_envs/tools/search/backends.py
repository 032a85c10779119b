"""Choosing a backend: open any index or server by its path or URL, build any kind of index.

``open_retriever("idx/")`` reads the index's manifest (or recognises a plain Lucene folder);
``open_retriever("http://127.0.0.1:8000")`` gives the HTTP client, and a comma-separated list
of URLs (replicas of one index) a client spreading its searches over them.  ``shared_retriever``
returns one open retriever per index per process, so many environments share one searcher.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from tir_envs.tools.search.corpus import BACKENDS, build_command, detect_backend
from tir_envs.tools.search.retriever import Retriever

_shared: dict[str, Retriever] = {}
_shared_lock = threading.Lock()


def auto_backend() -> str:
    """``lucene`` where Java ≥ 21 and pyserini's jar are available, else the no-Java ``bm25``."""
    from tir_envs.tools.search.jvm import lucene_available
    return "lucene" if lucene_available() else "bm25"


def check_source(source: Any, backend: str = "auto") -> None:
    """Fail at construction, with the fix, for what would otherwise fail at the first search:
    an unknown backend, an index folder that does not exist, a missing ``[search]`` extra."""
    from tir_envs.tools.search.jvm import lucene_available
    if backend not in ("auto", "lucene", "bm25"):
        raise ValueError(f"unknown search backend {backend!r}; choose auto, lucene or bm25")
    if isinstance(source, str) and source.startswith(("http://", "https://")):
        return  # the HTTP client is the standard library's
    if isinstance(source, (str, Path)):
        if not Path(source).is_dir():
            raise FileNotFoundError(f"no index folder at {source}; build one with "
                                    f"`{build_command(source)}` (a JSONL corpus: 'id' + "
                                    "'contents', or 'title' + 'text', per line) or pass "
                                    "retriever=None for the shipped HotpotQA index")
        return
    if source is not None:
        return  # a Retriever or a factory: the caller's own
    if backend == "lucene" and not lucene_available():
        raise ImportError("search_backend='lucene' needs Java >= 21, pyjnius and pyserini's "
                          "jar: pip install 'tir-envs[search]' && pip install --no-deps "
                          "pyserini==1.6.0 (docs/search.md), or use search_backend='bm25'")
    if backend in ("auto", "bm25") and not (backend == "auto" and lucene_available()):
        _require("bm25s", "the in-process BM25 index needs bm25s")


def _require(module: str, why: str) -> None:
    import importlib.util
    if importlib.util.find_spec(module) is None:
        raise ImportError(f"{why}: pip install 'tir-envs[search]'")


def open_retriever(source: Any, backend: str | None = None, **kwargs: Any) -> Retriever:
    """A retriever for ``source``: a ``Retriever`` (returned as is), an http(s) URL, or an
    index folder (backend from its manifest, or ``backend`` to insist on one).  ``kwargs``
    go to the backend (e.g. bm25 ``mmap=True``, lucene ``k1``/``b``)."""
    if isinstance(source, Retriever):
        return source
    if isinstance(source, str) and source.startswith(("http://", "https://")):
        from tir_envs.tools.search.spread import SpreadRetriever, split_urls
        urls = split_urls(source)
        if len(urls) > 1:  # replicas of one index: searches spread over them
            return SpreadRetriever(urls, **kwargs)
        from tir_envs.tools.search.client import HttpRetriever
        return HttpRetriever(source, **kwargs)
    if not isinstance(source, (str, Path)):
        raise TypeError(f"retriever must be a Retriever, an index path or an http URL, "
                        f"got {type(source).__name__}")
    found = detect_backend(source)
    backend = backend or found
    if backend != found:
        raise ValueError(f"{source} is a {found} index, not {backend}")
    if backend == "lucene":
        from tir_envs.tools.search.lucene import LuceneRetriever
        return LuceneRetriever(source, **kwargs)
    if backend == "bm25":
        from tir_envs.tools.search.bm25 import BM25Retriever
        return BM25Retriever.load(source, **kwargs)
    if backend == "dense":
        from tir_envs.tools.search.dense import DenseRetriever
        return DenseRetriever.load(source, **kwargs)
    raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")


def shared_retriever(source: str | Path) -> Retriever:
    """One open retriever per index folder (or URL) per process."""
    key = str(source) if str(source).startswith("http") else str(Path(source).resolve())
    with _shared_lock:
        if key not in _shared:
            _shared[key] = open_retriever(source)
        return _shared[key]


def build_index(corpus: str | Path, out: str | Path, backend: str = "auto",
                overwrite: bool = False, **kwargs: Any) -> Path:
    """Index the JSONL ``corpus`` into ``out`` with ``backend`` (``auto``: see
    ``auto_backend``).  Backend options: lucene ``threads``; dense ``model``, ``faiss_index``
    (a faiss factory string), ``train_size``, ``nprobe``, ``ef_search``, ``pooling``,
    ``query_prefix``, ``passage_prefix``, ``batch_size``, ``device``."""
    backend = auto_backend() if backend == "auto" else backend
    if backend == "lucene":
        from tir_envs.tools.search.lucene import build_lucene_index
        return build_lucene_index(corpus, out, overwrite=overwrite, **kwargs)
    if backend == "bm25":
        from tir_envs.tools.search.bm25_build import build_bm25_index
        return build_bm25_index(corpus, out, overwrite=overwrite, **kwargs)
    if backend == "dense":
        if not kwargs.get("model"):
            raise ValueError("a dense index needs model=<local embedding model folder> "
                             "(CLI: --model PATH)")
        from tir_envs.tools.search.dense import build_dense_index
        return build_dense_index(corpus, out, overwrite=overwrite, **kwargs)
    raise ValueError(f"unknown backend {backend!r}; choose one of auto, {', '.join(BACKENDS)}")


#: manifest fields that say which index a run searched (its size, what it was built from)
_INDEX_FIELDS = ("backend", "num_docs", "corpus", "model", "faiss_index", "imported")


def describe_index(source: str | Path) -> dict[str, Any]:
    """Which index ``source`` is, for a run's record: an index folder's path and manifest
    facts (backend, passages, corpus, encoder), or a server's URL and what ``/health`` says.
    Read without opening the index (no JVM, no model)."""
    text = str(source)
    if text.startswith(("http://", "https://")):
        from tir_envs.tools.search.spread import SpreadRetriever, split_urls
        health = SpreadRetriever(split_urls(text), timeout_s=10).info()
        return {"url": text, **{k: health[k] for k in _INDEX_FIELDS if k in health}}
    from tir_envs.tools.search.corpus import read_manifest
    path = Path(source).resolve()
    backend = detect_backend(path)
    manifest = read_manifest(path) or {}
    return {"path": str(path), "backend": backend,
            **{k: manifest[k] for k in _INDEX_FIELDS[1:] if k in manifest}}
