"""A JSONL corpus read in place: one line per document, found through ``mmap`` when asked for.

Many server workers (and a 13 GB wiki-18 corpus) cannot each hold every passage in memory;
this keeps 16 bytes a document (its line's start and end) in the process and leaves the text in
the shared page cache.  The line offsets are found by scanning the file in blocks, so opening
a corpus larger than memory needs no more than one block at a time.  Each line is parsed when
its document is asked for, by the same rules as a corpus being indexed (``id``, else the line's
position; ``contents``, else ``title`` + ``text``).
"""

from __future__ import annotations

import json
import mmap
from pathlib import Path

import numpy as np

from tir_envs.tools.search.retriever import contents_of

#: bytes scanned for line ends at a time while opening
_BLOCK = 64 << 20


class MappedDocs:
    """The documents of the JSONL file ``path``, read through ``mmap`` (module docstring)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        with open(self.path, "rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self._starts, self._ends = _line_spans(self._map)

    def __len__(self) -> int:
        return len(self._ends)

    def record(self, i: int) -> dict[str, str]:
        """Document ``i`` as ``{"id", "contents"}``."""
        raw = json.loads(self._map[self._starts[i]:self._ends[i]])
        return {"id": str(raw.get("id", i)), "contents": contents_of(raw)}

    def view(self, name: str) -> "FieldView":
        return FieldView(self, name)


def _line_spans(data: mmap.mmap) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (exclusive, newline included) of every non-blank line, block by block."""
    ends = []
    for offset in range(0, len(data), _BLOCK):
        block = np.frombuffer(data, dtype=np.uint8, count=min(_BLOCK, len(data) - offset),
                              offset=offset)
        ends.append(np.flatnonzero(block == ord("\n")).astype(np.int64) + offset + 1)
    end = np.concatenate(ends) if ends else np.zeros(0, np.int64)
    if len(data) and (not len(end) or end[-1] != len(data)):
        end = np.append(end, len(data))  # a last line without its newline
    start = np.concatenate([[0], end[:-1]]).astype(np.int64)
    keep = np.ones(len(end), dtype=bool)
    for i in np.flatnonzero((end - start) <= 16):  # only a short line can be blank
        keep[i] = bool(data[start[i]:end[i]].strip())
    return start[keep], end[keep]


class FieldView:
    """``docs.view("id")[i]``: one field of document ``i``, parsed when asked for."""

    def __init__(self, docs: MappedDocs, name: str):
        self._docs, self._name = docs, name

    def __len__(self) -> int:
        return len(self._docs)

    def __getitem__(self, i: int) -> str:
        return self._docs.record(int(i))[self._name]
