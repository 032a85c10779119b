"""Dense retrieval (optional extra ``dense``): passages embedded by a local encoder, searched
with a faiss inner-product index (exact ``Flat``, or approximate IVF, HNSW, PQ).

An index folder holds ``index.faiss``, ``docs.jsonl`` (row i of the index is line i) and the
manifest with the encoder settings.  ``build_dense_index`` streams the corpus: passages are
encoded and added a batch at a time, so memory is the index itself plus one batch (and, for
an index that must be trained, a random sample of ``train_size`` passages drawn in a first
pass).  ``import_faiss_index`` adopts an index built elsewhere (FlashRAG's / Search-R1's
``e5_Flat.index`` with its ``wiki-18.jsonl``) in place: the folder only names the two files.
``convert_dense_index`` makes an approximate index from a ``Flat`` one's vectors without
encoding again (wiki-18's 65 GB e5 ``Flat`` index into a 1.3 GB ``IVF65536,PQ64np`` one).
The encoder: ``encoder.py``; the faiss side: ``faiss_index.py``.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from tir_envs.tools.search import faiss_index as fx
from tir_envs.tools.search.corpus import (CorpusStats, batches, building, folder_bytes,
                                          iter_corpus, peak_rss_mb, read_manifest, write_manifest)
from tir_envs.tools.search.encoder import POOLINGS, Encoder, model_dim
from tir_envs.tools.search.mapped_docs import MappedDocs
from tir_envs.tools.search.retriever import Hit, Retriever, check_k

__all__ = ["POOLINGS", "DenseRetriever", "Encoder", "build_dense_index", "convert_dense_index",
           "import_faiss_index"]

#: passages encoded and added to the index at a time while building
ADD_BATCH = 1024


class DenseRetriever(Retriever):
    """Top-k passages of ``docs`` by inner product of ``encoder`` embeddings, through the faiss
    ``index`` (row i is document i); ``exact_vectors``: search these with numpy instead."""

    backend = "dense"

    def __init__(self, docs: Sequence[dict[str, str]] | MappedDocs, index: Any,
                 encoder: Encoder, query_prefix: str = "", spec: str = "Flat",
                 search_params: dict[str, int] | None = None,
                 exact_vectors: np.ndarray | None = None):
        if len(docs) != index.ntotal:
            raise ValueError(f"the faiss index holds {index.ntotal:,} vectors but there are "
                             f"{len(docs):,} documents; they must be the same passages in the "
                             "same order (rebuild the index from this corpus)")
        if isinstance(docs, MappedDocs):
            self.ids, self.contents = docs.view("id"), docs.view("contents")
        else:
            self.ids = [d["id"] for d in docs]
            self.contents = [d["contents"] for d in docs]
        self.index, self.encoder, self.query_prefix, self.spec = index, encoder, query_prefix, spec
        self.search_params = fx.set_search_params(index, search_params or {})
        self._exact = exact_vectors

    @classmethod
    def load(cls, index: str | Path, model: str | Path | None = None, device: str = "cpu",
             use_faiss: bool | None = None, mmap: bool = False,
             **search_params: int) -> "DenseRetriever":
        """Open a folder written by ``build_dense_index`` or ``import_faiss_index``.

        ``model`` overrides the encoder path of the manifest; ``mmap`` maps the index and the
        documents instead of loading them (shared by server workers; an imported corpus is
        always mapped); ``nprobe`` / ``efSearch`` override the index's search settings.
        ``use_faiss=False`` searches a ``Flat`` index's vectors with numpy (same results).
        """
        folder = Path(index)
        m = read_manifest(folder) or {}
        if m.get("backend") != "dense":
            raise ValueError(f"{folder} is not a dense index (manifest backend: "
                             f"{m.get('backend')!r})")
        encoder = Encoder(model or m["model"], pooling=m["pooling"],
                          max_length=m.get("max_length", 256), device=device)
        faiss_index, spec = _open_index(folder, m, mmap)
        exact = None
        if use_faiss is False:
            if fx.family(spec) != "flat":
                raise ValueError(f"use_faiss=False searches exact vectors: only a 'Flat' index "
                                 f"keeps them, {folder} is {spec!r}")
            exact = faiss_index.reconstruct_n(0, faiss_index.ntotal)
        docs_file = folder / m.get("docs_file", "docs.jsonl")
        docs = MappedDocs(docs_file) if mmap or m.get("imported") else \
            [json.loads(line) for line in docs_file.open(encoding="utf-8")]
        params = {**m.get("search_params", {}), **search_params}
        return cls(docs, faiss_index, encoder, query_prefix=m.get("query_prefix", ""),
                   spec=spec, search_params=params, exact_vectors=exact)

    @property
    def num_docs(self) -> int:
        return len(self.ids)

    def search(self, query: str, k: int = 3) -> list[Hit]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int = 3,
                     threads: int = 1) -> list[list[Hit]]:
        check_k(k)
        if not queries:
            return []
        q = self.encoder.encode([self.query_prefix + x for x in queries])
        k = min(k, self.num_docs)
        if self._exact is not None:
            all_scores = q @ self._exact.T
            idx = np.argsort(-all_scores, axis=1, kind="stable")[:, :k]
            scores = np.take_along_axis(all_scores, idx, axis=1)
        else:
            scores, idx = self.index.search(q, k)
        return [[Hit(self.ids[i], float(s), self.contents[i])
                 for i, s in zip(row_i, row_s) if i >= 0] for row_i, row_s in zip(idx, scores)]

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "model": str(self.encoder.path),
                "pooling": self.encoder.pooling, "faiss": self._exact is None,
                "faiss_index": self.spec, **self.search_params}


def _open_index(folder: Path, manifest: dict[str, Any], mmap: bool) -> tuple[Any, str]:
    """The faiss index of a dense folder and its factory string (an index of an earlier
    version, ``embeddings.npy``, becomes a ``Flat`` one)."""
    if "faiss_file" not in manifest and (folder / "embeddings.npy").is_file():
        vectors = np.load(folder / "embeddings.npy")
        index = fx.make_index(vectors.shape[1], "Flat")
        index.add(np.ascontiguousarray(vectors, dtype=np.float32))
        return index, "Flat"
    path = folder / manifest.get("faiss_file", "index.faiss")  # absolute when imported
    return fx.read_index(path, mmap=mmap), manifest.get("faiss_index", "Flat")


def build_dense_index(corpus: str | Path, out: str | Path, model: str | Path,
                      faiss_index: str = "Flat", train_size: int | None = None,
                      pooling: str | None = None, query_prefix: str = "",
                      passage_prefix: str = "", max_length: int = 256, batch_size: int = 64,
                      device: str = "cpu", overwrite: bool = False, skip_bad: bool = False,
                      progress: bool = False, nprobe: int | None = None,
                      ef_search: int | None = None, seed: int = 0) -> Path:
    """Embed the ``corpus`` (JSONL or Parquet) with the local encoder ``model`` into a faiss
    index (``faiss_index``: a factory string, module docstring) in the folder ``out``.

    Streams: ``ADD_BATCH`` passages are read, written, encoded and added at a time.  An index
    that must be trained (IVF, PQ) is trained first on ``train_size`` passages drawn at random
    in a first reading pass (default: 40 per centroid, at least 10,000).  ``nprobe`` /
    ``ef_search``: the search settings stored as the index's defaults.  Built in a scratch
    folder renamed into place at the end, as every index (``corpus.building``).
    """
    start = time.perf_counter()
    params = {"nprobe": nprobe, "efSearch": ef_search}
    params = {k: v for k, v in params.items() if v is not None}
    encoder = Encoder(model, pooling=pooling, max_length=max_length, batch_size=batch_size,
                      device=device)
    index = fx.make_index(encoder.dim, faiss_index)
    fx.set_search_params(index, params)  # a bad setting fails before any encoding
    stats = CorpusStats()
    with building(out, overwrite) as tmp:
        trained_on = 0
        if not index.is_trained:
            need = fx.min_training_vectors(index)
            size = train_size or min(max(40 * need, 10_000), 500_000)
            sample = _sample(iter_corpus(corpus, skip_bad), size, seed)
            fx.train(index, encoder.encode([passage_prefix + c for c in sample]), faiss_index)
            trained_on = len(sample)
        with (tmp / "docs.jsonl").open("w", encoding="utf-8") as f:
            for batch in batches(iter_corpus(corpus, skip_bad, stats, progress), ADD_BATCH):
                f.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in batch)
                index.add(encoder.encode([passage_prefix + d["contents"] for d in batch]))
        if index.ntotal == 0:
            raise ValueError(f"{corpus} has no usable document ({stats.skipped} skipped)")
        fx.write_index(index, tmp / "index.faiss")
        write_manifest(tmp, backend="dense", num_docs=int(index.ntotal), corpus=str(corpus),
                       model=str(Path(model).resolve()), pooling=encoder.pooling,
                       query_prefix=query_prefix, passage_prefix=passage_prefix,
                       max_length=max_length, dim=encoder.dim, faiss_index=faiss_index,
                       faiss_file="index.faiss", docs_file="docs.jsonl", search_params=params,
                       trained_on=trained_on, skipped=stats.skipped,
                       skipped_examples=stats.errors,
                       build_seconds=round(time.perf_counter() - start, 2),
                       index_bytes=folder_bytes(tmp), **peak_rss_mb())
    return Path(out)


def _sample(docs: Iterator[dict[str, str]], size: int, seed: int) -> list[str]:
    """``size`` passages' contents drawn uniformly from ``docs`` in one pass (reservoir
    sampling: only the sample is held)."""
    rng, sample = random.Random(seed), []
    for n, doc in enumerate(docs):
        if n < size:
            sample.append(doc["contents"])
        else:
            j = rng.randrange(n + 1)
            if j < size:
                sample[j] = doc["contents"]
    return sample


def import_faiss_index(faiss_file: str | Path, corpus: str | Path, out: str | Path,
                       model: str | Path, pooling: str | None = "mean",
                       query_prefix: str = "query: ", passage_prefix: str = "passage: ",
                       max_length: int = 256, faiss_index: str = "Flat",
                       overwrite: bool = False) -> Path:
    """A dense index folder over a faiss index file built elsewhere and its JSONL corpus,
    both used in place (nothing copied): FlashRAG's and Search-R1's ``e5_Flat.index`` over
    ``wiki-18.jsonl`` (e5-base-v2: mean pooling, ``"query: "`` prefix; the defaults).

    Checked now: the index opens, its size equals the corpus's passages and its dimension
    the model's.  ``faiss_index`` names what the file is (for ``describe``)."""
    faiss_file, corpus = Path(faiss_file).resolve(), Path(corpus).resolve()
    if not Path(model).is_dir():
        raise FileNotFoundError(f"embedding model folder {model} does not exist; dense "
                                "retrieval loads local models only (download it first)")
    if corpus.suffix in (".gz", ".parquet"):
        raise ValueError(f"{corpus} is read in place, so it must be plain JSONL; decompress "
                         "it first (gzip -dk FILE) or build an index from it with "
                         "`tir-envs index build --backend dense`")
    if not corpus.is_file():
        raise FileNotFoundError(f"corpus {corpus} does not exist")
    index = fx.read_index(faiss_file, mmap=True)
    info = fx.describe_index(index)
    docs = MappedDocs(corpus)
    if len(docs) != info["ntotal"]:
        raise ValueError(f"{faiss_file} holds {info['ntotal']:,} vectors but {corpus} has "
                         f"{len(docs):,} passages; the index must have been built from this "
                         "corpus, in its order")
    for i in {0, len(docs) - 1}:
        try:
            docs.record(i)
        except (ValueError, KeyError) as exc:
            raise ValueError(f"{corpus}: passage {i} is not a corpus record ({exc})") from None
    dim = model_dim(model)
    if dim is not None and dim != info["dim"]:
        raise ValueError(f"{faiss_file} holds {info['dim']}-dimensional vectors but the model "
                         f"{model} makes {dim}-dimensional ones: use the model that built it")
    with building(out, overwrite) as tmp:
        write_manifest(tmp, backend="dense", imported=True, num_docs=len(docs),
                       corpus=str(corpus), model=str(Path(model).resolve()),
                       pooling=pooling or "mean", query_prefix=query_prefix,
                       passage_prefix=passage_prefix, max_length=max_length, dim=info["dim"],
                       faiss_index=faiss_index, faiss_file=str(faiss_file),
                       docs_file=str(corpus), metric=info["metric"], search_params={})
    return Path(out)


def convert_dense_index(source: str | Path, out: str | Path, faiss_index: str,
                        train_size: int | None = None, nprobe: int | None = None,
                        ef_search: int | None = None, batch: int = 65_536,
                        overwrite: bool = False, seed: int = 0) -> Path:
    """A new dense index of the ``Flat`` index ``source``'s vectors as ``faiss_index``, read
    back from it (memory-mapped) a ``batch`` at a time instead of encoding the passages again.
    Trained, as a build is, on ``train_size`` vectors drawn at random; the passages stay
    where ``source`` keeps them (the new folder names that file); same encoder settings."""
    start = time.perf_counter()
    folder = Path(source)
    m = read_manifest(folder) or {}
    if m.get("backend") != "dense":
        raise ValueError(f"{folder} is not a dense index (manifest backend: "
                         f"{m.get('backend')!r})")
    flat, spec = _open_index(folder, m, mmap=True)
    if fx.family(spec) != "flat":
        raise ValueError(f"{folder} is a {spec!r} index: only a 'Flat' one keeps the vectors "
                         "exactly; convert from the Flat index (or build from the corpus)")
    params = {k: v for k, v in {"nprobe": nprobe, "efSearch": ef_search}.items()
              if v is not None}
    index = fx.make_index(flat.d, faiss_index)
    fx.set_search_params(index, params)
    n = int(flat.ntotal)
    with building(out, overwrite) as tmp:
        trained_on = 0
        if not index.is_trained:
            size = train_size or min(max(40 * fx.min_training_vectors(index), 10_000), 500_000)
            rows = np.sort(np.random.default_rng(seed).choice(n, min(size, n), replace=False))
            fx.train(index, np.stack([flat.reconstruct(int(i)) for i in rows]), faiss_index)
            trained_on = len(rows)
        for first in range(0, n, batch):
            index.add(flat.reconstruct_n(first, min(batch, n - first)))
        fx.write_index(index, tmp / "index.faiss")
        docs = (folder / m.get("docs_file", "docs.jsonl")).resolve()
        write_manifest(tmp, **{**m, "faiss_index": faiss_index, "faiss_file": "index.faiss",
                               "docs_file": str(docs), "imported": True,
                               "converted_from": str(folder.resolve()),
                               "search_params": params, "trained_on": trained_on,
                               "build_seconds": round(time.perf_counter() - start, 2),
                               "index_bytes": folder_bytes(tmp), **peak_rss_mb()})
    return Path(out)
