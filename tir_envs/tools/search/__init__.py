"""Search: retrievers (Lucene BM25 via pyserini, in-process BM25, dense with faiss), the
retrieval server, its client and its replicas on a Ray cluster, corpus and index building, and
the ``search`` tool.

Heavy backends are imported lazily: ``import tir_envs.tools.search`` needs nothing beyond the
core install, and loads none of its modules until a name is used (``tir-envs --help`` reads
only the command modules).
"""

import importlib
from typing import Any

_LAZY = {"auto_backend": "backends", "build_index": "backends", "open_retriever": "backends",
         "shared_retriever": "backends", "format_hits": "formatting", "Hit": "retriever",
         "Retriever": "retriever", "RetrieverError": "retriever", "SearchTool": "tool",
         "RetrievalServer": "server_process", "RetrievalReplicas": "replicas",
         "SpreadRetriever": "spread"}
__all__ = ["Hit", "RetrievalReplicas", "RetrievalServer", "Retriever", "RetrieverError",
           "SearchTool", "SpreadRetriever", "auto_backend", "build_index", "format_hits",
           "open_retriever", "shared_retriever"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"tir_envs.tools.search.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'tir_envs.tools.search' has no attribute {name!r}")
