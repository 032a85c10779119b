"""BM25 in the Python process, no Java: ``bm25s`` scoring with English stemming and stopwords.

For users who cannot run a JVM, and for small corpora where a separate runtime is overkill.
Scores use Lucene's BM25 variant (``bm25s`` method ``lucene``, ``k1=0.9``, ``b=0.4`` as in
Anserini); the analyzer differs from Lucene's (``bm25s`` tokens are 2+ word characters, Snowball
stemming), so rankings are close to, not identical with, the Lucene backend.  The index is
built by streaming the corpus (``bm25_build``); searching holds the score matrix and the
documents in memory, or maps both (``load(mmap=True)``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from tir_envs.tools.search.corpus import normalize_docs, read_manifest
from tir_envs.tools.search.lucene import B, K1
from tir_envs.tools.search.mapped_docs import MappedDocs
from tir_envs.tools.search.retriever import Hit, Retriever, check_k

_HINT = "the in-process BM25 backend needs `pip install 'tir-envs[search]'` (bm25s, PyStemmer)"


def bm25_modules():
    try:
        import bm25s
        import Stemmer
    except ImportError as exc:
        raise ImportError(f"{_HINT}; missing {exc.name}") from None
    return bm25s, Stemmer


def tokenize(texts: Sequence[str], stem: Any, ids: bool = False):
    """Lower-cased words of 2+ characters, English stopwords removed, Snowball-stemmed: how
    both the index build and a query split text (token lists, or bm25s ids with ``ids``)."""
    bm25s, _ = bm25_modules()
    return bm25s.tokenize(list(texts), lower=True, stopwords="en", stemmer=stem,
                          return_ids=ids, show_progress=False)


class BM25Retriever(Retriever):
    """In-memory BM25 over ``docs`` (``{"id", "contents"}`` records)."""

    backend = "bm25"

    def __init__(self, docs: Sequence[dict[str, str]], model: Any = None,
                 k1: float = K1, b: float = B):
        bm25s, Stemmer = bm25_modules()
        self._bm25s = bm25s
        self._stem = Stemmer.Stemmer("english").stemWords
        if isinstance(docs, MappedDocs):
            self.ids, self.contents = docs.view("id"), docs.view("contents")
        else:
            self.ids = [d["id"] for d in docs]
            self.contents = [d["contents"] for d in docs]
        if model is None:
            model = bm25s.BM25(k1=k1, b=b, method="lucene")
            model.index(self._tokenize(self.contents, ids=True), show_progress=False)
        self.model = model
        self.k1, self.b = float(model.k1), float(model.b)

    @classmethod
    def from_docs(cls, docs: Iterable[dict[str, Any]], k1: float = K1,
                  b: float = B) -> "BM25Retriever":
        """Index documents in memory (``contents``, or ``title`` + ``text``, per record)."""
        return cls(normalize_docs(docs), k1=k1, b=b)

    @classmethod
    def load(cls, index: str | Path, mmap: bool = False) -> "BM25Retriever":
        """Open a folder written by ``build_bm25_index``.  ``mmap``: memory-map the score
        matrix (bm25s) and the documents (read from ``docs.jsonl`` per hit) instead of
        loading them, so many processes share one copy in the page cache."""
        bm25s, _ = bm25_modules()
        index = Path(index)
        manifest = read_manifest(index) or {}
        if manifest.get("backend") != "bm25":
            raise ValueError(f"{index} is not an in-process BM25 index (manifest backend: "
                             f"{manifest.get('backend')!r})")
        if mmap:
            model = bm25s.BM25.load(str(index / "bm25s"), mmap=True, show_progress=False)
            return cls(MappedDocs(index / "docs.jsonl"), model=model)
        docs = [json.loads(line) for line in (index / "docs.jsonl").open(encoding="utf-8")]
        return cls(docs, model=bm25s.BM25.load(str(index / "bm25s")))

    def _tokenize(self, texts: Sequence[str], ids: bool = False):
        return tokenize(texts, self._stem, ids)

    @property
    def num_docs(self) -> int:
        return len(self.ids)

    def search(self, query: str, k: int = 3) -> list[Hit]:
        return self._rank(self._tokenize([query])[0], check_k(k))

    def batch_search(self, queries: Sequence[str], k: int = 3,
                     threads: int = 1) -> list[list[Hit]]:
        check_k(k)
        return [self._rank(tokens, k) for tokens in self._tokenize(queries)]

    def _rank(self, tokens: list[str], k: int) -> list[Hit]:
        """Top ``k`` by score among documents sharing a term with the query; ties by order.

        Selecting among the non-zero scores only is much faster than a partition over the
        whole corpus, where most scores are 0.
        """
        if not tokens:
            return []
        scores = self.model.get_scores(tokens)
        cand = np.flatnonzero(scores)
        if len(cand) > k:
            cand = cand[np.argpartition(-scores[cand], k - 1)[:k]]
        cand = cand[np.lexsort((cand, -scores[cand]))]
        return [Hit(self.ids[i], float(scores[i]), self.contents[i]) for i in cand]

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "k1": self.k1, "b": self.b}
