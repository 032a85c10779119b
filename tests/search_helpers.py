"""Indexes the search tests share, built once per test process (real Lucene, real bm25s).

Building is a ``java`` subprocess (a few seconds for the HotpotQA corpus); searching starts one
JVM in the test process.  Everything lives in one temporary folder removed at exit, which is
also the ``TIR_ENVS_CACHE_DIR`` the default-index tests point at, so the HotpotQA index the
default ``tir/Search-v0`` builds is the same one the other tests use.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import shutil
import tempfile
from pathlib import Path

ROOT = Path(tempfile.mkdtemp(prefix="tir-search-tests-"))
atexit.register(shutil.rmtree, ROOT, ignore_errors=True)

#: a small corpus with known answers: each query below has one clearly best document
SMALL_DOCS = [
    {"id": "paris", "title": "Paris", "text": "Paris is the capital and largest city of France."},
    {"id": "berlin", "title": "Berlin", "text": "Berlin is the capital of Germany, on the Spree."},
    {"id": "hamlet", "title": "Hamlet", "text": "Hamlet is a tragedy written by William "
                                                "Shakespeare around 1600."},
    {"id": "python", "title": "Python (programming language)",
     "text": "Python is a programming language created by Guido van Rossum."},
    {"id": "everest", "title": "Mount Everest",
     "text": "Mount Everest is Earth's highest mountain above sea level, in the Himalayas."},
    {"id": "nile", "title": "Nile", "text": "The Nile is a major river in northeastern Africa."},
    {"id": "amazon", "title": "Amazon River",
     "text": "The Amazon River in South America is the largest river by discharge."},
    {"id": "einstein", "title": "Albert Einstein",
     "text": "Albert Einstein was a physicist who developed the theory of relativity."},
]
SMALL_QUERIES = {"capital of France": "paris", "who wrote the tragedy Hamlet": "hamlet",
                 "highest mountain": "everest", "theory of relativity physicist": "einstein",
                 "Guido van Rossum language": "python"}


@contextlib.contextmanager
def cache_env():
    """``TIR_ENVS_CACHE_DIR`` pointed at the shared test folder for the ``with`` block."""
    old = os.environ.get("TIR_ENVS_CACHE_DIR")
    os.environ["TIR_ENVS_CACHE_DIR"] = str(ROOT / "cache")
    try:
        yield ROOT / "cache"
    finally:
        if old is None:
            os.environ.pop("TIR_ENVS_CACHE_DIR", None)
        else:
            os.environ["TIR_ENVS_CACHE_DIR"] = old


@functools.lru_cache(maxsize=None)
def small_corpus() -> Path:
    path = ROOT / "small.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in SMALL_DOCS))
    return path


@functools.lru_cache(maxsize=None)
def small_index(backend: str) -> Path:
    from tir_envs.tools.search import build_index
    return build_index(small_corpus(), ROOT / f"small-{backend}", backend=backend)


@functools.lru_cache(maxsize=None)
def hotpotqa_index(backend: str = "lucene") -> Path:
    from tir_envs.tools.search.hotpotqa import hotpotqa_index as build
    with cache_env():
        return build(backend)


@functools.lru_cache(maxsize=None)
def hotpotqa_corpus() -> Path:
    from tir_envs.tools.search.hotpotqa import hotpotqa_corpus as build
    with cache_env():
        return build()


@functools.lru_cache(maxsize=None)
def tiny_encoder() -> Path:
    """A random 1-layer BERT (hidden 32) and the tiny BPE tokenizer, saved as a local encoder
    folder: dense retrieval without any model hub."""
    import torch
    from transformers import BertConfig, BertModel

    from tests.fixtures.tiny import tiny_tokenizer
    tok = tiny_tokenizer()
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=512,
                        pad_token_id=tok.pad_token_id)
    folder = ROOT / "tiny-encoder-shared"
    BertModel(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@functools.lru_cache(maxsize=None)
def paragraphs_corpus(n: int = 600) -> Path:
    """The first ``n`` shipped HotpotQA paragraphs as a FlashRAG JSONL corpus."""
    from tir_envs.data.qa import hotpotqa_paragraphs
    path = ROOT / f"paragraphs-{n}.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for i, d in enumerate(hotpotqa_paragraphs()[:n]):
            f.write(json.dumps({"id": f"d{i}", "contents": f'"{d["title"]}"\n{d["text"]}'})
                    + "\n")
    return path
