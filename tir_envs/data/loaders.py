"""Reading task files: JSONL, Parquet, or a Hugging Face dataset, with precise errors.

A malformed record names the file, the line and the field, so a bad dataset is fixed in one go.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, Iterator, Sequence


class DatasetError(ValueError):
    """A dataset file or record that cannot be used, with where and why."""


def iter_located_jsonl(path: str | Path) -> Iterator[tuple[str, Any]]:
    """``(where, record)`` for each line of a JSONL file (``.jsonl.gz`` too); ``where`` is
    ``file:line``, for errors raised by whoever checks the record."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: no such file")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield f"{path}:{lineno}", json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{lineno}: invalid JSON ({exc.msg} at column "
                                   f"{exc.colno})") from exc


def iter_jsonl(path: str | Path, required: Sequence[str] = ()) -> Iterator[dict[str, Any]]:
    """Yield the records of a JSONL file, checking each has the ``required`` fields."""
    for where, record in iter_located_jsonl(path):
        check_record(record, required, where)
        yield record


def check_record(record: Any, required: Sequence[str], where: str) -> None:
    if not isinstance(record, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(record).__name__}")
    for field in required:
        if field not in record or record[field] is None:
            raise DatasetError(f"{where}: missing field {field!r} (has {sorted(record)})")


def read_parquet(path: str | Path, required: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Records of a Parquet file (needs pyarrow), checked like JSONL rows."""
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ImportError("reading Parquet needs pyarrow: pip install pyarrow") from exc
    rows = pq.read_table(str(path)).to_pylist()
    for i, row in enumerate(rows):
        check_record(row, required, f"{path}:row {i}")
    return rows


def read_hf_dataset(name: str, split: str = "test", required: Sequence[str] = (),
                    **kwargs: Any) -> list[dict[str, Any]]:
    """Records of a Hugging Face dataset (local cache or hub), checked like JSONL rows."""
    try:
        import datasets
    except ImportError as exc:
        raise ImportError("loading a Hugging Face dataset needs `pip install datasets`") from exc
    rows = list(datasets.load_dataset(name, split=split, **kwargs))
    for i, row in enumerate(rows):
        check_record(row, required, f"{name}[{split}]:row {i}")
    return rows


def read_records(source: str | Path, required: Sequence[str] = (), split: str = "test",
                 **kwargs: Any) -> list[dict[str, Any]]:
    """Records from a ``.jsonl``/``.parquet`` path or, failing that, a dataset name."""
    path = Path(source)
    if path.suffix == ".jsonl" or path.name.endswith(".jsonl.gz"):
        return list(iter_jsonl(path, required))
    if path.suffix == ".parquet":
        if not path.is_file():
            raise DatasetError(f"{path}: no such file")
        return read_parquet(path, required)
    if path.exists():
        raise DatasetError(f"{path}: unsupported file type; use .jsonl or .parquet")
    return read_hf_dataset(str(source), split=split, required=required, **kwargs)


def expect_count(records: Sequence[Any], expected: int, name: str) -> None:
    """Guard shipped datasets against silent truncation or duplication."""
    if len(records) != expected:
        raise DatasetError(f"{name}: expected {expected} records, found {len(records)}; "
                           "the shipped file is damaged, reinstall the package")
