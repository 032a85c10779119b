"""Bounded capture of what code prints.

Fd 1 and 2 of a session are in-memory files (``memfd``): whatever writes there (a subprocess,
C code, ``os.write``) is captured in order, up to ``RLIMIT_FSIZE``, and ``read_fd`` takes the
head and the tail of it.  Python-level writes (``print``) go through a ``CappedText`` stream
that writes the head to the same fd, then keeps only a tail in memory and counts the middle,
so printing a gigabyte costs a loop, not a gigabyte.  The cut is always marked in the text.
"""

from __future__ import annotations

import io
import os


def marker(dropped: int) -> str:
    return f"\n...[{dropped} characters truncated]...\n"


def sanitize(text: str) -> str:
    """Replace lone surrogates so the text always encodes as UTF-8."""
    return text.encode("utf-8", "replace").decode("utf-8")


def truncate_text(text: str, limit: int) -> tuple[str, int]:
    """Keep the first 3/4 and the last 1/4 of ``limit`` characters; return (text, dropped)."""
    if len(text) <= limit:
        return text, 0
    tail = limit // 4
    head = limit - tail
    dropped = len(text) - head - tail
    return text[:head] + marker(dropped) + (text[-tail:] if tail else ""), dropped


class _BytesView:
    """``sys.stdout.buffer`` for code that writes bytes: decoded into the text stream."""

    def __init__(self, owner: "CappedText"):
        self._owner = owner

    def write(self, data) -> int:
        self._owner.write(bytes(data).decode("utf-8", "replace"))
        return len(data)

    def flush(self) -> None:
        return None


class CappedText(io.TextIOBase):
    """``sys.stdout``/``sys.stderr`` of a session.

    The first ``limit - limit // 4`` characters are written straight to the stream's fd (the
    in-memory file that also receives subprocess output), so output keeps its order.  After
    that only the last ``limit // 4`` characters are kept, in memory, and the rest is counted.
    """

    def __init__(self, limit: int, fd: int):
        super().__init__()
        self._fd = fd
        self.reset(limit)

    def reset(self, limit: int) -> None:
        self.limit = max(1, int(limit))
        self._tail_limit = self.limit // 4
        self._head_room = self.limit - self._tail_limit
        self._tail: list[str] = []
        self._tail_len = 0
        self.dropped = 0

    encoding = "utf-8"
    errors = "replace"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._fd

    def flush(self) -> None:
        return None

    @property
    def buffer(self) -> _BytesView:
        return _BytesView(self)

    def write(self, s) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        n = len(s)
        if self._head_room > 0 and s:
            part = s[:self._head_room]
            try:
                os.write(self._fd, part.encode("utf-8", "replace"))
            except OSError:  # fd closed by the code, or the file-size limit: keep in memory
                self._head_room = 0
            else:
                self._head_room -= len(part)
                s = s[len(part):]
        if s:
            self._tail.append(s)
            self._tail_len += len(s)
            if self._tail_len > 2 * self._tail_limit + 1024:
                self._trim_tail()
        return n

    def _trim_tail(self) -> None:
        joined = "".join(self._tail)
        keep = joined[-self._tail_limit:] if self._tail_limit else ""
        self.dropped += len(joined) - len(keep)
        self._tail, self._tail_len = [keep], len(keep)

    def overflow(self) -> tuple[str, int]:
        """What did not fit in the head: (kept tail, number of characters dropped)."""
        self._trim_tail()
        return "".join(self._tail), self.dropped


def reset_fd(fd: int) -> None:
    """Empty the in-memory file behind ``fd`` before a run."""
    try:
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        pass


def read_fd(fd: int, limit: int) -> tuple[str, int]:
    """Head and tail of what was written to ``fd`` since ``reset_fd`` (bytes → text)."""
    try:
        size = os.fstat(fd).st_size
    except OSError:
        return "", 0
    if size == 0:
        return "", 0
    budget = 4 * limit  # UTF-8: at most 4 bytes a character
    if size <= budget:
        text = os.pread(fd, size, 0).decode("utf-8", "replace")
        return truncate_text(text, limit)
    tail_chars = limit // 4
    head = os.pread(fd, 4 * (limit - tail_chars), 0).decode("utf-8", "replace")[: limit - tail_chars]
    tail = os.pread(fd, 4 * tail_chars, size - 4 * tail_chars).decode("utf-8", "replace")
    tail = tail[-tail_chars:] if tail_chars else ""
    dropped = max(0, size - len(head.encode()) - len(tail.encode()))
    return head + marker(dropped) + tail, dropped
