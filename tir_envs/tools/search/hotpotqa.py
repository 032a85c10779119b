"""The offline default: the HotpotQA paragraph corpus and its index, built once into a cache.

``tir/Search-v0`` with no arguments searches the 10,785 paragraphs of the shipped HotpotQA
dev-distractor subset.  The corpus (wiki-18 layout, ``'"Title"\\ntext'``) and its index are
built on first use into ``$TIR_ENVS_CACHE_DIR`` (default ``~/.cache/tir_envs``) under a file
lock, so many processes starting together build it once; later runs just open it.
"""

from __future__ import annotations

import os
from pathlib import Path

from tir_envs.tools.search.backends import auto_backend, build_index, shared_retriever
from tir_envs.tools.search.corpus import build_command, file_lock, read_manifest, write_jsonl
from tir_envs.tools.search.retriever import Retriever, contents_of

#: bump when the corpus layout or index settings change, so stale caches are rebuilt
VERSION = 1


def cache_dir() -> Path:
    """``$TIR_ENVS_CACHE_DIR``, else ``$XDG_CACHE_HOME/tir_envs``, else ``~/.cache/tir_envs``."""
    if os.environ.get("TIR_ENVS_CACHE_DIR"):
        return Path(os.environ["TIR_ENVS_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tir_envs"


def write_hotpotqa_corpus(path: str | Path) -> Path:
    """Write the HotpotQA paragraph corpus as ``{"id", "contents"}`` JSONL to ``path``."""
    from tir_envs.data.qa import hotpotqa_paragraphs

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    write_jsonl(({"id": d["id"], "contents": contents_of(d)} for d in hotpotqa_paragraphs()),
                tmp)
    tmp.replace(path)
    return path


def hotpotqa_corpus() -> Path:
    """The cached corpus file (written on first use)."""
    root = cache_dir() / "search"
    path = root / f"hotpotqa-paragraphs-v{VERSION}.jsonl"
    with file_lock(root / ".lock"):
        if not path.is_file():
            write_hotpotqa_corpus(path)
    return path


def hotpotqa_index(backend: str = "auto") -> Path:
    """The cached index of the HotpotQA corpus for ``backend`` (built on first use)."""
    backend = auto_backend() if backend == "auto" else backend
    if backend not in ("lucene", "bm25"):
        raise ValueError(f"the default HotpotQA index is lucene or bm25, not {backend!r}; "
                         "build a dense one with "
                         f"`{build_command('dense-idx', 'hotpotqa', 'dense')} --model MODEL_DIR`")
    corpus = hotpotqa_corpus()
    root = cache_dir() / "search"
    out = root / f"hotpotqa-{backend}-v{VERSION}"
    with file_lock(root / ".lock"):
        if read_manifest(out) is None:
            build_index(corpus, out, backend=backend, overwrite=True)
    return out


def hotpotqa_retriever(backend: str = "auto") -> Retriever:
    """The process-wide shared retriever over the HotpotQA corpus."""
    return shared_retriever(hotpotqa_index(backend))
