"""Building the in-process BM25 index by streaming the corpus: memory bounded by one chunk of
passages and the vocabulary, not the corpus.

bm25s indexes a corpus held whole in memory (its texts, then every document's token list as
Python objects: several GB at a million passages).  This builder reads ``CHUNK`` passages at a
time, tokenizes them exactly as the retriever tokenizes queries (``bm25.tokenize``), and
spills each document's ``(term, tf)`` pairs to files in the scratch folder; per-term document
frequencies and document lengths are kept as numpy arrays.  A second pass over those files
computes each pair's BM25 score (Lucene's variant, as bm25s ``method="lucene"``) and writes it
straight into its place in the score matrix's column (a counting sort by term, memory-mapped
output), in bm25s's file layout, so ``bm25s.BM25.load`` (and ``mmap=True``) reads it as an
index of its own.  Scores equal those of an in-memory bm25s build of the same corpus.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Iterator

import numpy as np

from tir_envs.tools.search.bm25 import bm25_modules, tokenize
from tir_envs.tools.search.corpus import (CorpusStats, batches, building, folder_bytes,
                                          iter_corpus, peak_rss_mb, write_manifest)
from tir_envs.tools.search.lucene import B, K1

#: passages read, tokenized and spilled at a time
CHUNK = 5_000


class _Postings:
    """The ``(doc, term, tf)`` triples of the corpus, spilled to three files as they come."""

    def __init__(self, folder: Path):
        folder.mkdir()
        self.paths = {name: folder / f"{name}.bin" for name in ("doc", "term", "tf")}
        self.files = {name: p.open("wb") for name, p in self.paths.items()}
        self.chunks: list[int] = []  # triples per chunk, to read them back chunk by chunk

    def add(self, docs: np.ndarray, terms: np.ndarray, tfs: np.ndarray) -> None:
        self.files["doc"].write(docs.astype(np.int32).tobytes())
        self.files["term"].write(terms.astype(np.int32).tobytes())
        self.files["tf"].write(tfs.astype(np.float32).tobytes())
        self.chunks.append(len(docs))

    def close(self) -> None:
        for f in self.files.values():
            f.close()

    def read(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The triples back, one chunk at a time (plain reads: a mapping would keep every page
        read so far resident)."""
        files = {name: p.open("rb") for name, p in self.paths.items()}
        try:
            for n in self.chunks:
                yield tuple(np.fromfile(files[k], dtype=np.float32 if k == "tf" else np.int32,
                                        count=n) for k in ("doc", "term", "tf"))
        finally:
            for f in files.values():
                f.close()


def build_bm25_index(corpus: str | Path, out: str | Path, overwrite: bool = False,
                     k1: float = K1, b: float = B, skip_bad: bool = False,
                     progress: bool = False) -> Path:
    """Index the ``corpus`` (JSONL or Parquet) into the folder ``out`` for
    ``BM25Retriever.load``, streaming (module docstring); ``skip_bad`` and ``progress`` as
    for the Lucene build; ``out`` appears only when done."""
    start = time.perf_counter()
    bm25s, Stemmer = bm25_modules()
    stem = Stemmer.Stemmer("english").stemWords
    stats = CorpusStats()
    vocab: dict[str, int] = {}
    df = np.zeros(0, np.int64)
    lengths: list[np.ndarray] = []
    with building(out, overwrite) as tmp:
        postings = _Postings(tmp / "_postings")
        n = 0
        with (tmp / "docs.jsonl").open("w", encoding="utf-8") as f:
            for batch in batches(iter_corpus(corpus, skip_bad, stats, progress), CHUNK):
                f.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in batch)
                docs, terms, tfs, lens = _count(tokenize([d["contents"] for d in batch], stem),
                                                vocab, n)
                postings.add(docs, terms, tfs)
                df = np.concatenate([df, np.zeros(len(vocab) - len(df), np.int64)])
                df += np.bincount(terms, minlength=len(vocab))
                lengths.append(lens)
                n += len(batch)
        postings.close()
        if n == 0:
            raise ValueError(f"{corpus} has no usable document ({stats.skipped} skipped)")
        if progress:
            print(f"scoring {int(df.sum()):,} postings of {n:,} documents...", flush=True,
                  file=sys.stderr)
        model = bm25s.BM25(k1=k1, b=b, method="lucene")
        _write_matrix(tmp / "bm25s", postings, df, np.concatenate(lengths), vocab, model)
        for p in postings.paths.values():
            p.unlink()
        postings.paths["doc"].parent.rmdir()
        write_manifest(tmp, backend="bm25", num_docs=n, corpus=str(corpus), k1=k1, b=b,
                       vocabulary=len(vocab), postings=int(df.sum()), streamed=True,
                       skipped=stats.skipped, skipped_examples=stats.errors,
                       build_seconds=round(time.perf_counter() - start, 2),
                       index_bytes=folder_bytes(tmp), **peak_rss_mb())
    return Path(out)


def _count(tokens: list[list[str]], vocab: dict[str, int], first: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(doc, term, tf)`` triples and document lengths of one chunk; new terms join
    ``vocab`` in order of first appearance; documents numbered from ``first``."""
    docs, terms, tfs = [], [], []
    lengths = np.zeros(len(tokens), np.int32)
    for i, doc in enumerate(tokens):
        lengths[i] = len(doc)
        for term, tf in Counter(doc).items():
            docs.append(first + i)
            terms.append(vocab.setdefault(term, len(vocab)))
            tfs.append(tf)
    return (np.array(docs, np.int32), np.array(terms, np.int32), np.array(tfs, np.float32),
            lengths)


def _write_matrix(folder: Path, postings: _Postings, df: np.ndarray, lengths: np.ndarray,
                  vocab: dict[str, int], model) -> None:
    """The score matrix (documents × terms, compressed by column) in bm25s's files."""
    folder.mkdir()
    n, avg = len(lengths), float(lengths.mean())
    vocab = dict(vocab)
    vocab.setdefault("", len(vocab))  # bm25s's index has an (empty) column for ""
    counts = np.concatenate([df, np.zeros(len(vocab) - len(df), np.int64)])
    nnz = int(counts.sum())
    index_dtype = np.int32 if nnz < 2**31 else np.int64
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(index_dtype)
    idf = np.zeros(len(counts), np.float32)
    seen = counts > 0
    idf[seen] = np.log1p((n - counts[seen] + 0.5) / (counts[seen] + 0.5))
    open_memmap = np.lib.format.open_memmap
    data = open_memmap(folder / "data.csc.index.npy", "w+", np.float32, (nnz,))
    indices = open_memmap(folder / "indices.csc.index.npy", "w+", np.int32, (nnz,))
    cursor = indptr[:-1].astype(np.int64)
    for docs, terms, tfs in postings.read():
        norm = model.k1 * ((1 - model.b) + model.b * lengths[docs] / avg)
        scores = idf[terms] * (tfs / (norm + tfs))
        order = np.argsort(terms, kind="stable")  # by term, documents in order within one
        sorted_terms = terms[order]
        group_start = np.searchsorted(sorted_terms, sorted_terms, side="left")
        pos = cursor[sorted_terms] + (np.arange(len(order)) - group_start)
        data[pos] = scores[order]
        indices[pos] = docs[order]
        cursor += np.bincount(terms, minlength=len(cursor))
        _release(data, indices)
    data.flush()
    indices.flush()
    del data, indices
    np.save(folder / "indptr.csc.index.npy", indptr)
    (folder / "vocab.index.json").write_text(json.dumps(vocab, ensure_ascii=False),
                                             encoding="utf-8")
    params = {"k1": model.k1, "b": model.b, "delta": model.delta, "method": model.method,
              "idf_method": model.idf_method, "dtype": model.dtype,
              "int_dtype": model.int_dtype, "num_docs": n, "version": _version(),
              "backend": model.backend}
    (folder / "params.index.json").write_text(json.dumps(params, indent=4))


def _release(*arrays: np.memmap) -> None:
    """Write the mapped pages out and drop them from this process (they stay in the page
    cache): the matrix is written all over at each chunk, and its pages would otherwise all
    stay resident, counted in the build's memory."""
    import mmap
    for array in arrays:
        array.flush()
        handle = getattr(array, "_mmap", None)
        if handle is not None and hasattr(mmap, "MADV_DONTNEED"):
            handle.madvise(mmap.MADV_DONTNEED)


def _version() -> str:
    import bm25s
    return getattr(bm25s, "__version__", "unknown")
