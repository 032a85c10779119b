"""Search: retrievers (Lucene BM25 via pyserini, in-process BM25, dense), the retrieval server
and its client, corpus and index building, and the ``search`` tool.

Heavy backends are imported lazily: ``import tir_envs.tools.search`` needs nothing beyond the
core install.
"""

from tir_envs.tools.search.backends import (auto_backend, build_index, open_retriever,
                                            shared_retriever)
from tir_envs.tools.search.formatting import format_hits
from tir_envs.tools.search.retriever import Hit, Retriever, RetrieverError
from tir_envs.tools.search.tool import SearchTool

__all__ = ["Hit", "Retriever", "RetrieverError", "SearchTool", "auto_backend", "build_index",
           "format_hits", "open_retriever", "shared_retriever"]
