"""Dense retrieval (optional extra ``dense``): faiss inner-product search over embeddings from
a local sentence-embedding model (e5, bge, contriever, or any sentence-transformers folder).

The encoder is a Hugging Face model loaded from a local folder only (never the hub), pooled
(``mean`` or ``cls``; a sentence-transformers folder's ``1_Pooling/config.json`` decides) and
L2-normalised, so inner product is cosine similarity.  Search-R1's e5 retriever corresponds to
``pooling="mean", query_prefix="query: ", passage_prefix="passage: "``.  The index folder keeps
``embeddings.npy`` and the encoder settings; search uses an exact faiss ``IndexFlatIP``
(numpy matrix products when faiss is not installed, with the same results).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from tir_envs.tools.search.corpus import (building, iter_corpus, read_manifest, write_jsonl,
                                          write_manifest)
from tir_envs.tools.search.retriever import Hit, Retriever, check_k

POOLINGS = ("mean", "cls")


class Encoder:
    """Sentence embeddings from the local Hugging Face encoder folder ``model``."""

    def __init__(self, model: str | Path, pooling: str | None = None, max_length: int = 256,
                 batch_size: int = 64, device: str = "cpu"):
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.path = Path(model)
        if not self.path.is_dir():
            raise FileNotFoundError(f"embedding model folder {self.path} does not exist; dense "
                                    "retrieval loads local models only (download it first)")
        self.pooling = pooling or _folder_pooling(self.path)
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")
        self._torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.path), local_files_only=True)
        self.model = AutoModel.from_pretrained(str(self.path), local_files_only=True)
        self.model.to(device).eval()
        self.device, self.max_length, self.batch_size = device, max_length, batch_size

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32, unit-norm rows."""
        out = [self._batch(list(texts[i:i + self.batch_size]))
               for i in range(0, len(texts), self.batch_size)]
        return np.concatenate(out) if out else np.zeros((0, self.dim), np.float32)

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    def _batch(self, texts: list[str]) -> np.ndarray:
        torch = self._torch
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                             return_tensors="pt").to(self.device)
        with torch.inference_mode():
            hidden = self.model(**enc).last_hidden_state
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        pooled = torch.nn.functional.normalize(pooled.float(), dim=-1)
        return pooled.cpu().numpy().astype(np.float32)


def _folder_pooling(path: Path) -> str:
    """``cls`` or ``mean`` from a sentence-transformers pooling config; ``mean`` otherwise."""
    config = path / "1_Pooling" / "config.json"
    if config.is_file():
        if json.loads(config.read_text()).get("pooling_mode_cls_token"):
            return "cls"
    return "mean"


class DenseRetriever(Retriever):
    """Exact inner-product search over ``embeddings`` of ``docs`` with ``encoder`` queries."""

    backend = "dense"

    def __init__(self, docs: Sequence[dict[str, str]], embeddings: np.ndarray, encoder: Encoder,
                 query_prefix: str = "", use_faiss: bool | None = None):
        if len(docs) != len(embeddings):
            raise ValueError(f"{len(docs)} documents but {len(embeddings)} embeddings")
        self.ids = [d["id"] for d in docs]
        self.contents = [d["contents"] for d in docs]
        self.encoder, self.query_prefix = encoder, query_prefix
        self.embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        self._faiss = _faiss_index(self.embeddings) if use_faiss is not False else None
        if use_faiss and self._faiss is None:
            raise ImportError("use_faiss=True but faiss is not installed: "
                              "pip install 'tir-envs[dense]'")

    @classmethod
    def load(cls, index: str | Path, model: str | Path | None = None, device: str = "cpu",
             use_faiss: bool | None = None) -> "DenseRetriever":
        """Open a folder written by ``build_dense_index`` (``model`` overrides its path)."""
        index = Path(index)
        m = read_manifest(index) or {}
        if m.get("backend") != "dense":
            raise ValueError(f"{index} is not a dense index (manifest backend: "
                             f"{m.get('backend')!r})")
        encoder = Encoder(model or m["model"], pooling=m["pooling"],
                          max_length=m.get("max_length", 256), device=device)
        docs = [json.loads(line) for line in (index / "docs.jsonl").open(encoding="utf-8")]
        return cls(docs, np.load(index / "embeddings.npy"), encoder,
                   query_prefix=m.get("query_prefix", ""), use_faiss=use_faiss)

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
        if self._faiss is not None:
            scores, idx = self._faiss.search(q, k)
        else:
            all_scores = q @ self.embeddings.T
            idx = np.argsort(-all_scores, axis=1, kind="stable")[:, :k]
            scores = np.take_along_axis(all_scores, idx, axis=1)
        return [[Hit(self.ids[i], float(s), self.contents[i])
                 for i, s in zip(row_i, row_s) if i >= 0] for row_i, row_s in zip(idx, scores)]

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "model": str(self.encoder.path),
                "pooling": self.encoder.pooling, "faiss": self._faiss is not None}


def _faiss_index(embeddings: np.ndarray):
    try:
        import faiss
    except ImportError:
        return None
    index = faiss.IndexFlatIP(embeddings.shape[1])
    index.add(embeddings)
    return index


def build_dense_index(corpus: str | Path, out: str | Path, model: str | Path,
                      pooling: str | None = None, query_prefix: str = "",
                      passage_prefix: str = "", max_length: int = 256, batch_size: int = 64,
                      device: str = "cpu", overwrite: bool = False, skip_bad: bool = False,
                      progress: bool = False) -> Path:
    """Embed the JSONL ``corpus`` with the local encoder ``model`` into the folder ``out``."""
    start = time.perf_counter()
    docs = list(iter_corpus(corpus, skip_bad=skip_bad, progress=progress))
    encoder = Encoder(model, pooling=pooling, max_length=max_length, batch_size=batch_size,
                      device=device)
    embeddings = encoder.encode([passage_prefix + d["contents"] for d in docs])
    with building(out, overwrite) as tmp:
        write_jsonl(docs, tmp / "docs.jsonl")
        np.save(tmp / "embeddings.npy", embeddings)
        write_manifest(tmp, backend="dense", num_docs=len(docs), corpus=str(corpus),
                       model=str(Path(model).resolve()), pooling=encoder.pooling,
                       query_prefix=query_prefix, passage_prefix=passage_prefix,
                       max_length=max_length, dim=encoder.dim,
                       build_seconds=round(time.perf_counter() - start, 2))
    return Path(out)
