"""One writer per run folder: an exclusive lock held for the whole run.

Two ``bench`` processes on the same ``--out`` would each run every sample and interleave their
records.  The lock is an ``flock`` on ``RUN_DIR/.lock``: the kernel releases it when its holder
exits however it exits (``kill -9``, a crash), so a lock left by a dead holder is free to take
and taking it is atomic; no pid-liveness guess decides.  The file holds the holder's pid, host
and start time, so a refused process can say who holds the folder.  On a network file system
``flock`` is only as good as the server's lock support (NFSv4 is fine).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

LOCK = ".lock"


class RunFolderBusy(RuntimeError):
    """Another live process holds the run folder."""


class RunLock:
    """The exclusive lock of one run folder; ``acquire`` refuses at once when it is held."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.path = self.folder / LOCK
        self._fd: int | None = None
        self._made_folder = False
        self.previous: dict[str, Any] | None = None  # a dead holder's record, if one was left

    def acquire(self) -> "RunLock":
        self._made_folder = not self.folder.exists()
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            os.close(fd)
            self._made_folder = False
            raise RunFolderBusy(
                f"{self.folder} is in use by pid {holder.get('pid', '?')} on host "
                f"{holder.get('host', '?')} (since {holder.get('started', '?')}): one process "
                "writes a run folder at a time; wait for it to finish (then rerun to resume) or "
                "pass another --out") from None
        self.previous = _read(fd) or None  # the record of a holder that died holding it
        me = {"pid": os.getpid(), "host": socket.gethostname(),
              "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode(), 0)
        os.fsync(fd)
        self._fd = fd
        return self

    def release(self) -> None:
        """Unlock; a folder this lock created and nothing else wrote to goes away again (a
        refused or failed start leaves no trace that would refuse the corrected command)."""
        if self._fd is None:
            return
        os.ftruncate(self._fd, 0)  # an empty record: released cleanly, nobody died holding it
        if self._made_folder and [p.name for p in self.folder.iterdir()] == [LOCK]:
            self.path.unlink()
            self.folder.rmdir()
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _read(fd: int) -> dict[str, Any]:
    try:
        data = os.pread(fd, 4096, 0)
        return json.loads(data) if data.strip() else {}
    except (OSError, ValueError):
        return {}
