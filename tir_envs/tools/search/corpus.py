"""Retrieval corpora: streaming a corpus, and the index folder conventions.

A corpus is JSONL (plain or ``.gz``, one document per line) or Parquet (one per row), streamed
record by record with ``file:line`` errors, in either layout the field uses:
``{"id", "contents"}`` (pyserini, FlashRAG, Search-R1's wiki-18: first line of ``contents`` is
the title) or ``{"id", "title", "text"}`` (DPR, BEIR).  Both become ``{"id", "contents"}``.
Every index this package builds is a folder with a ``tir_envs_index.json`` manifest naming its
backend; a folder without one but with Lucene ``segments_N`` files is read as a Lucene index,
so indexes built by pyserini or Anserini (e.g. prebuilt Wikipedia BM25 indexes) just work.
An index is built in a hidden scratch folder renamed into place at the end (``building``).
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import json
import os
import shutil
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from tir_envs.data.loaders import DatasetError
from tir_envs.tools.search.retriever import contents_of

MANIFEST = "tir_envs_index.json"
BACKENDS = ("lucene", "bm25", "dense")


@dataclass
class CorpusStats:
    """What a corpus pass saw: records read and bad records skipped (``skip_bad``)."""

    read: int = 0
    skipped: int = 0
    #: the first few skipped records' errors (``file:line: why``), for the build report
    errors: list[str] = field(default_factory=list)

    def skip(self, error: Exception) -> None:
        self.skipped += 1
        if len(self.errors) < 5:
            self.errors.append(str(error))


def iter_corpus(path: str | Path, skip_bad: bool = False, stats: CorpusStats | None = None,
                progress: bool = False) -> Iterator[dict[str, str]]:
    """``{"id", "contents"}`` records of a corpus file, streamed, with ``file:line`` errors.

    Formats: JSONL (``.jsonl``, ``.json``, any other suffix; ``.gz`` compressed too) and
    Parquet (``.parquet``, read in row batches).  A record without ``id`` gets its 0-based
    position; duplicate ids are an error.  ``skip_bad`` skips (and counts in ``stats``) a bad
    record instead of raising; ``progress`` draws a tqdm bar with ETA on stderr.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: no such corpus file (expected JSONL with 'id' and "
                           "'contents', or 'title' and 'text', per line; or Parquet)")
    stats = stats if stats is not None else CorpusStats()
    seen = IdSet()
    rows = _parquet_rows(path) if path.suffix == ".parquet" else _jsonl_rows(path)
    with _progress_bar(path, progress) as bar:
        for batch in batches(rows, 4096):
            bar.update(batch[-1][2] - bar.n)
            parsed: list[tuple[str, dict[str, str] | DatasetError]] = []
            for where, raw, _ in batch:
                try:
                    parsed.append((where, _record(raw, where, stats.read + stats.skipped
                                                  + len(parsed))))
                except DatasetError as exc:
                    parsed.append((where, exc))
            ids = [r["id"] if isinstance(r, dict) else None for _, r in parsed]
            for (where, record), dup in zip(parsed, seen.add_batch(ids)):
                if dup:
                    record = DatasetError(f"{where}: duplicate document id {record['id']!r}; "
                                          "ids must be unique")
                if isinstance(record, DatasetError):
                    if not skip_bad:
                        raise record
                    stats.skip(record)
                    continue
                stats.read += 1
                yield record
        bar.update(bar.total - bar.n)  # the last lines between two position checks


def batches(rows: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """``rows`` in lists of ``size`` (the last may be shorter): a streaming build holds one."""
    batch = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


class IdSet:
    """The document ids seen so far, as 64-bit hashes in sorted numpy runs: 8 bytes an id
    (a Python set of strings takes ~100, 2 GB for wiki-18's 21 M ids).  Runs of similar size
    are merged (as in a log-structured merge tree), so there are O(log n) of them to search.
    A hash collision between two different ids has odds ~n²/2⁶⁵ (1e-5 at 21 M)."""

    def __init__(self) -> None:
        self._runs: list[Any] = []

    def add_batch(self, ids: list[str | None]) -> list[bool]:
        """Add ``ids`` in order; for each, whether it was seen before (``None``: skipped)."""
        import hashlib
        import numpy as np
        hashes = [int.from_bytes(hashlib.blake2b(i.encode(), digest_size=8).digest(), "little")
                  if i is not None else None for i in ids]
        known = np.array([h for h in hashes if h is not None], dtype=np.uint64)
        hit = np.zeros(len(known), dtype=bool)
        for run in self._runs:
            pos = np.minimum(np.searchsorted(run, known), len(run) - 1)
            hit |= run[pos] == known
        dup, fresh, j = [], set(), 0
        for h in hashes:
            if h is None:
                dup.append(False)
                continue
            dup.append(bool(hit[j]) or h in fresh)
            fresh.add(h)
            j += 1
        run = np.sort(np.fromiter(fresh, dtype=np.uint64, count=len(fresh)))
        while self._runs and len(self._runs[-1]) <= 2 * len(run):
            run = np.sort(np.concatenate([self._runs.pop(), run]))
        if len(run):
            self._runs.append(run)
        return dup


def _jsonl_rows(path: Path) -> Iterator[tuple[str, str, int]]:
    """``(file:line, text, bytes read so far)`` per non-blank line (gzip by suffix)."""
    with (gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")) as f:
        raw_file = getattr(f, "fileobj", None) or f  # progress in compressed bytes
        done = 0
        for lineno, line in enumerate(f, 1):
            if lineno % 1024 == 0:
                done = raw_file.tell()
            if not line.strip():
                continue
            try:
                text: str | UnicodeDecodeError = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                text = exc  # reported by _record with the line
            yield f"{path}:{lineno}", text, done


def _parquet_rows(path: Path, batch_rows: int = 8192) -> Iterator[tuple[str, dict, int]]:
    """``(file:row N, record, rows read so far)``, one row batch in memory at a time."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError("reading a Parquet corpus needs pyarrow: pip install pyarrow") from None
    n = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_rows):
        for row in batch.to_pylist():
            n += 1
            yield f"{path}:row {n}", row, n


@contextlib.contextmanager
def _progress_bar(path: Path, enabled: bool) -> Iterator[Any]:
    """A tqdm bar over bytes (JSONL) or rows (Parquet) with ETA, on stderr; silent if off."""
    from tqdm import tqdm
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq
        total, unit, scale = pq.ParquetFile(path).metadata.num_rows, " docs", False
    else:
        total, unit, scale = path.stat().st_size, "B", True
    with tqdm(total=total, unit=unit, unit_scale=scale, disable=not enabled, file=sys.stderr,
              desc=f"reading {path.name}", mininterval=1.0) as bar:
        yield bar


def normalize_docs(docs: Iterable[dict[str, Any]], where: str = "corpus") -> list[dict[str, str]]:
    """``{"id", "contents"}`` records from in-memory documents (same rules as a file)."""
    records = [_record(d, f"{where}[{i}]", i) for i, d in enumerate(docs)]
    seen: set[str] = set()
    for i, record in enumerate(records):
        if record["id"] in seen:
            raise DatasetError(f"{where}[{i}]: duplicate document id {record['id']!r}; ids "
                               "must be unique")
        seen.add(record["id"])
    return records


def _record(raw: str | dict[str, Any] | Exception, where: str,
            position: int) -> dict[str, str]:
    if isinstance(raw, UnicodeDecodeError):
        raise DatasetError(f"{where}: not UTF-8 text ({raw.reason} at byte {raw.start})")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{where}: invalid JSON ({exc.msg}, column {exc.colno}); "
                               "each line must be one JSON object") from exc
    if not isinstance(raw, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    for name in ("contents", "title", "text"):
        value = raw.get(name)
        if value is not None and not isinstance(value, str):
            raise DatasetError(f"{where}: field {name!r} must be a string, got "
                               f"{type(value).__name__}")
    try:
        contents = contents_of(raw)
    except ValueError as exc:
        raise DatasetError(f"{where}: {exc}") from None
    docid = raw.get("id", raw.get("docid", raw.get("_id", position)))
    if not isinstance(docid, (str, int)) or isinstance(docid, bool):
        raise DatasetError(f"{where}: field 'id' must be a string or an integer, got "
                           f"{type(docid).__name__}")
    return {"id": str(docid), "contents": contents}


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


#: the file in a scratch build folder naming the process that writes it
BUILDER_FILE = ".builder"


def scratch_folder(out: Path) -> Path:
    """Where the index ``out`` is built before the rename: a hidden sibling, one per target,
    so a build that was killed leaves a folder the next build finds."""
    return out.parent / f".{out.name}.building"


@contextlib.contextmanager
def building(out: str | Path, overwrite: bool = False) -> Iterator[Path]:
    """A scratch folder that becomes ``out`` only if the build finishes (atomic rename).

    Refuses to replace an existing non-empty ``out`` unless ``overwrite``.  A scratch folder
    left by an interrupted build (its process is gone) is removed, with a note on stderr; one
    whose builder still runs is refused, naming it.  So an interruption never leaves a
    half-written index at ``out``, and rerunning the same command is the fix.
    """
    out = Path(out)
    occupied = out.is_file() or (out.is_dir() and any(out.iterdir()))
    if occupied and not overwrite:
        raise FileExistsError(f"{out} already exists; pass overwrite=True (CLI: "
                              "--overwrite) or choose another --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = scratch_folder(out)
    _clear_leftover(tmp)
    try:
        tmp.mkdir()
    except FileExistsError:
        raise FileExistsError(f"another build of {out} started just now ({tmp} appeared); "
                              "wait for it to finish") from None
    (tmp / BUILDER_FILE).write_text(f"{os.getpid()} {socket.gethostname()}\n")
    try:
        yield tmp
        (tmp / BUILDER_FILE).unlink()
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _clear_leftover(tmp: Path) -> None:
    """Remove the scratch folder of a dead build; refuse if its builder is alive."""
    if not tmp.exists():
        return
    pid, host = _builder(tmp)
    if pid is not None and host == socket.gethostname() and pid != os.getpid() \
            and _alive(pid):
        raise FileExistsError(f"{tmp} is being written by a running build (pid {pid}); wait "
                              f"for it, or stop it (kill {pid}) and rerun this command")
    if host not in (None, socket.gethostname()):
        raise FileExistsError(f"{tmp} was left by a build on host {host!r}; if that build is "
                              f"not running any more, remove the folder (rm -r {tmp}) and rerun")
    print(f"tir-envs: removing {tmp}, left by an interrupted build (pid {pid})",
          file=sys.stderr)
    shutil.rmtree(tmp)


def _builder(tmp: Path) -> tuple[int | None, str | None]:
    try:
        pid, host = (tmp / BUILDER_FILE).read_text().split()
        return int(pid), host
    except (OSError, ValueError):
        return None, None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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


def write_shards(docs: Iterable[dict[str, str]], folder: Path, shards: int,
                 chunk: int = 10_000) -> int:
    """Write ``docs`` as JSONL into ``shards`` files of ``folder`` (``chunk`` documents to
    one file, then the next): indexers that run one thread per file (Anserini) get work for
    every thread.  Streams; returns the number written."""
    folder.mkdir(parents=True, exist_ok=True)
    files = [(folder / f"docs{i:02d}.jsonl").open("w", encoding="utf-8")
             for i in range(max(1, shards))]
    n = 0
    try:
        for doc in docs:
            files[(n // chunk) % len(files)].write(json.dumps(doc, ensure_ascii=False) + "\n")
            n += 1
    finally:
        for f in files:
            f.close()
    return n


def peak_rss_mb() -> dict[str, float]:
    """Peak resident memory so far, in MiB, of this process and of its finished children
    (e.g. the ``java`` indexer): what a build needed."""
    import resource
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"peak_rss_mb": round(own, 1), "peak_rss_children_mb": round(children, 1)}


def folder_bytes(folder: Path) -> int:
    """Total size of the files under ``folder`` (an index's size on disk)."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())
