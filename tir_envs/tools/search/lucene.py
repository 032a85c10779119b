"""BM25 over a Lucene index, through pyserini's Anserini toolkit (the default backend).

Search runs in-process (Anserini's ``SimpleSearcher`` via pyjnius, the class pyserini's
``LuceneSearcher`` wraps); ``batch_search`` runs a whole batch in Java threads.  Building runs
Anserini's ``IndexCollection`` in a ``java`` subprocess, so the indexer's memory and threads go
away with it.  Any Lucene index with stored ``raw`` or ``contents`` fields can be searched,
including pyserini's prebuilt Wikipedia BM25 indexes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from tir_envs.tools.search import jvm
from tir_envs.tools.search.corpus import (CorpusStats, building, folder_bytes, iter_corpus,
                                          peak_rss_mb, write_manifest, write_shards)
from tir_envs.tools.search.retriever import (Hit, Retriever, RetrieverError, check_k,
                                             contents_from_raw)

#: Anserini's BM25 defaults (what pyserini and Search-R1's BM25 server use)
K1, B = 0.9, 0.4
#: distinct query terms allowed (Lucene's default, 1024, makes a long model query an error)
MAX_QUERY_TERMS = 1 << 16


class LuceneRetriever(Retriever):
    """BM25 (``k1``, ``b``) over the Lucene index folder ``index``."""

    backend = "lucene"

    def __init__(self, index: str | Path, k1: float = K1, b: float = B):
        self.index = str(index)
        if not Path(self.index).is_dir():
            raise FileNotFoundError(f"Lucene index {self.index} does not exist")
        searcher_class = jvm.autoclass("io.anserini.search.SimpleSearcher")
        jvm.autoclass("org.apache.lucene.search.IndexSearcher").setMaxClauseCount(MAX_QUERY_TERMS)
        self._array_list = jvm.autoclass("java.util.ArrayList")
        try:
            # absolute: the JVM resolves a relative path against the directory it started in,
            # which is not Python's current one after an os.chdir
            self._searcher = searcher_class(str(Path(self.index).resolve()))
        except Exception as exc:  # noqa: BLE001 - a JavaException: unreadable index
            raise RetrieverError(f"cannot open Lucene index {self.index}: {exc}") from exc
        self._searcher.set_bm25(float(k1), float(b))
        self.k1, self.b = float(k1), float(b)
        self._num_docs = int(self._searcher.get_total_num_docs())

    @property
    def num_docs(self) -> int:
        return self._num_docs

    def search(self, query: str, k: int = 3) -> list[Hit]:
        check_k(k)
        jvm.keep_signal_handlers()
        return [self._hit(h) for h in self._searcher.search(query, k)]

    def batch_search(self, queries: Sequence[str], k: int = 3,
                     threads: int = 1) -> list[list[Hit]]:
        """All queries in one Java call, spread over ``threads`` Java threads."""
        check_k(k)
        jvm.keep_signal_handlers()
        texts, ids = self._array_list(), self._array_list()
        for i, q in enumerate(queries):
            texts.add(q)
            ids.add(str(i))
        found = self._searcher.batch_search(texts, ids, k, max(1, int(threads)))
        return [[self._hit(h) for h in (found.get(str(i)) or [])] for i in range(len(queries))]

    @staticmethod
    def _hit(h: Any) -> Hit:
        doc = h.lucene_document
        return Hit(h.docid, float(h.score), contents_from_raw(doc.get("raw"), doc.get("contents")))

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "index": self.index, "k1": self.k1, "b": self.b}

    def close(self) -> None:
        super().close()
        searcher, self._searcher = getattr(self, "_searcher", None), None
        if searcher is not None:
            searcher.close()


def build_lucene_index(corpus: str | Path, out: str | Path, threads: int = 1,
                       overwrite: bool = False, store_docvectors: bool = False,
                       skip_bad: bool = False, progress: bool = False,
                       memory_mb: int | None = None) -> Path:
    """Index the ``corpus`` (JSONL or Parquet) into the Lucene folder ``out``.

    The corpus is streamed once into ``threads`` normalised JSONL shards (Anserini runs one
    indexing thread per file), then Anserini's ``IndexCollection`` indexes them with positions
    and raw documents stored.  ``store_docvectors`` keeps per-document term vectors (needed
    for RM3).  ``skip_bad`` skips and counts bad records; ``progress`` draws a bar on stderr;
    ``memory_mb`` caps the Java heap (``-Xmx``).  Everything is written in a scratch folder
    renamed to ``out`` at the end: an interrupted build leaves no index.  Returns ``out``.
    """
    java, jar = jvm.java_executable(), jvm.anserini_jar()
    out, threads = Path(out), max(1, int(threads))
    start = time.perf_counter()
    stats = CorpusStats()
    with building(out, overwrite) as tmp:
        coll, index_dir = tmp / "_collection", tmp / "_index"
        n = write_shards(iter_corpus(corpus, skip_bad, stats, progress), coll, threads)
        if n == 0:
            raise RetrieverError(f"{corpus} has no usable document ({stats.skipped} skipped)")
        read_s = time.perf_counter() - start
        if progress:
            print(f"indexing {n:,} documents with Lucene ({threads} threads)...",
                  file=sys.stderr, flush=True)
        heap = [f"-Xmx{int(memory_mb)}m"] if memory_mb else []
        cmd = [java, "-Xrs", *heap, "-cp", jar, "io.anserini.index.IndexCollection",
               "-collection", "JsonCollection", "-generator", "DefaultLuceneDocumentGenerator",
               "-threads", str(threads), "-input", str(coll), "-index", str(index_dir),
               "-storePositions", "-storeRaw"] + (["-storeDocvectors"] if store_docvectors else [])
        proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              preexec_fn=die_with_parent)
        log = proc.stdout + proc.stderr
        m = re.search(r"indexed:\s+([\d,]+)", log)
        indexed = int(m.group(1).replace(",", "")) if m else -1
        if proc.returncode != 0 or indexed != n:
            raise RetrieverError(f"Lucene indexing of {corpus} failed (exit {proc.returncode}, "
                                 f"{indexed} of {n} documents indexed):\n{log[-2000:]}")
        shutil.rmtree(coll)
        for item in index_dir.iterdir():
            item.rename(tmp / item.name)
        index_dir.rmdir()
        write_manifest(tmp, backend="lucene", num_docs=n, corpus=str(corpus), k1=K1, b=B,
                       threads=threads, skipped=stats.skipped, skipped_examples=stats.errors,
                       read_seconds=round(read_s, 2),
                       build_seconds=round(time.perf_counter() - start, 2),
                       index_bytes=folder_bytes(tmp), **peak_rss_mb(),
                       anserini_jar=Path(jar).name)
    return out


def die_with_parent() -> None:
    """In the ``java`` child: be killed when the building process dies (even by SIGKILL), so
    no orphan indexer keeps writing into a scratch folder the next build will remove."""
    import ctypes
    import signal
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: an orphan indexer only wastes time; the rename still guards
