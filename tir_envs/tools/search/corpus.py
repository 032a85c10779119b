"""Retrieval corpora: reading a JSONL corpus, and the index folder conventions.

A corpus is JSONL, one document per line, in either layout the field uses:
``{"id", "contents"}`` (pyserini, FlashRAG, Search-R1's wiki-18: first line of ``contents`` is
the title) or ``{"id", "title", "text"}`` (DPR, BEIR).  Both become ``{"id", "contents"}``.
Every index this package builds is a folder with a ``tir_envs_index.json`` manifest naming its
backend; a folder without one but with Lucene ``segments_N`` files is read as a Lucene index,
so indexes built by pyserini or Anserini (e.g. prebuilt Wikipedia BM25 indexes) just work.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterable, Iterator

from tir_envs.data.loaders import DatasetError
from tir_envs.tools.search.retriever import contents_of

MANIFEST = "tir_envs_index.json"
BACKENDS = ("lucene", "bm25", "dense")


def iter_corpus(path: str | Path) -> Iterator[dict[str, str]]:
    """``{"id", "contents"}`` records of a JSONL corpus, with ``file:line`` errors.

    A record without ``id`` gets its 0-based position; duplicate ids are an error.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: no such corpus file (expected JSONL with 'id' and "
                           "'contents', or 'title' and 'text', per line)")
    seen: set[str] = set()
    with path.open(encoding="utf-8") as f:
        n = 0
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            yield _record(line, f"{path}:{lineno}", n, seen)
            n += 1


def normalize_docs(docs: Iterable[dict[str, Any]], where: str = "corpus") -> list[dict[str, str]]:
    """``{"id", "contents"}`` records from in-memory documents (same rules as a file)."""
    seen: set[str] = set()
    return [_record(d, f"{where}[{i}]", i, seen) for i, d in enumerate(docs)]


def _record(raw: str | dict[str, Any], where: str, position: int,
            seen: set[str]) -> dict[str, str]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{where}: invalid JSON ({exc.msg})") from exc
    if not isinstance(raw, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    try:
        contents = contents_of(raw)
    except ValueError as exc:
        raise DatasetError(f"{where}: {exc}") from None
    docid = str(raw.get("id", raw.get("docid", raw.get("_id", position))))
    if docid in seen:
        raise DatasetError(f"{where}: duplicate document id {docid!r}; ids must be unique")
    seen.add(docid)
    return {"id": docid, "contents": contents}


def write_jsonl(docs: Iterable[dict[str, str]], path: Path) -> int:
    n = 0
    with path.open("w", encoding="utf-8") as f:
        for doc in docs:
            f.write(json.dumps(doc, ensure_ascii=False) + "\n")
            n += 1
    return n


def read_manifest(index: str | Path) -> dict[str, Any] | None:
    path = Path(index) / MANIFEST
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def write_manifest(index: Path, **fields: Any) -> None:
    (index / MANIFEST).write_text(json.dumps(fields, indent=2, ensure_ascii=False) + "\n",
                                  encoding="utf-8")


def build_command(out: str | Path, corpus: str = "corpus.jsonl", backend: str = "") -> str:
    """The ``tir-envs index build`` command that creates the index ``out``: every error that
    finds no index names it, so the fix can be pasted as it is (after writing ``corpus``)."""
    extra = f" --backend {backend}" if backend else ""
    return f"tir-envs index build --corpus {corpus} --out {out}{extra}"


def detect_backend(index: str | Path) -> str:
    """The backend that reads ``index``: from its manifest, or ``lucene`` for a Lucene folder."""
    path = Path(index)
    if not path.is_dir():
        raise FileNotFoundError(f"index {path} does not exist; build one with "
                                f"`{build_command(path)}`")
    manifest = read_manifest(path)
    if manifest is not None:
        return manifest["backend"]
    if any(p.name.startswith("segments_") for p in path.iterdir()):
        return "lucene"
    raise ValueError(f"{path} is neither an index built by tir-envs (no {MANIFEST}) nor a "
                     "Lucene index (no segments_N file)")


@contextlib.contextmanager
def building(out: str | Path, overwrite: bool = False) -> Iterator[Path]:
    """A scratch folder that becomes ``out`` only if the build finishes (atomic rename).

    Refuses to replace an existing non-empty ``out`` unless ``overwrite``.
    """
    out = Path(out)
    occupied = out.is_file() or (out.is_dir() and any(out.iterdir()))
    if occupied and not overwrite:
        raise FileExistsError(f"{out} already exists; pass overwrite=True (CLI: "
                              "--overwrite) or choose another --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.building-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock across processes (many trainer workers building one cache)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
