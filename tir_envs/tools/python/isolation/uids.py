"""Host uids for sessions: each live session runs as a host uid of its own.

The kernel keeps several quotas per user: descriptors in flight over unix sockets (bounded by
``RLIMIT_NOFILE``), pipe buffer pages (``pipe-user-pages-soft``: past it new pipes get two
pages), inotify instances, message queues, keys.  Sessions that share a uid share those,
so one session could starve another.  A pool therefore claims a *block* of host uids for
itself (a lock file held for the pool's life, so concurrent pools on one host never share a
block) and gives each session its own uid from it; a uid goes back to the free list only
once every process of its previous session is gone (its cgroup removed, or its exit
reported) and, in the namespace modes, its files with it (the session's tmpfs).

Only a host that runs the fork server as root can do this (mapping a session's user
namespace onto an arbitrary host uid needs ``CAP_SETUID`` there); elsewhere every session
shares the fork server's uid, and ``UidPool.create`` says why.
"""

from __future__ import annotations

import fcntl
import os
import signal

BASE = 2_000_000_000      # far above any uid a distribution hands out
BLOCK = 8192              # uids per pool: more than max_sessions (4096) allows alive at once
BLOCKS = 200_000          # BASE + BLOCKS * BLOCK stays below 2**32 - 1 (the invalid uid)
LOCK_DIRS = ("/run/tir-envs-uids", "/dev/shm/tir-envs-uids")


class UidPool:
    """A claimed block of host uids: ``take`` one per session, ``give_back`` when gone."""

    def __init__(self, first: int, lock_fd: int):
        self.first = first
        self.lock_fd = lock_fd
        self.self_test = first            # the fork server's own self-test session
        self._free = list(range(first + BLOCK - 1, first, -1))
        self.in_use: set[int] = set()

    @classmethod
    def create(cls) -> tuple["UidPool | None", str | None]:
        """Claim a free block, or ``(None, why not)``."""
        if os.geteuid() != 0:
            return None, "not root: sessions share the fork server's uid"
        for lock_dir in LOCK_DIRS:
            try:
                os.makedirs(lock_dir, mode=0o700, exist_ok=True)
            except OSError:
                continue
            start = os.getpid() % BLOCKS
            for i in range(BLOCKS):
                block = (start + i) % BLOCKS
                fd = _try_lock(os.path.join(lock_dir, f"{block}.lock"))
                if fd is not None:
                    first = BASE + block * BLOCK
                    _kill_uids(first, first + BLOCK)  # leftovers of a host that died
                    return cls(first, fd), None
            return None, "every uid block is taken"
        return None, f"no writable directory for uid locks ({', '.join(LOCK_DIRS)})"

    def take(self) -> int | None:
        """A uid no live session uses, or None when the block is exhausted."""
        if not self._free:
            return None
        uid = self._free.pop()
        self.in_use.add(uid)
        return uid

    def give_back(self, uid: int | None) -> None:
        """``uid``'s session is gone (processes and files): it may serve another."""
        if uid is not None and uid in self.in_use:
            self.in_use.discard(uid)
            self._free.append(uid)

    def close(self) -> None:
        if self.lock_fd >= 0:
            os.close(self.lock_fd)
            self.lock_fd = -1


def _try_lock(path: str) -> int | None:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def processes_of(lo: int, hi: int) -> list[int]:
    """Pids whose real uid is in ``[lo, hi)`` (one ``/proc`` scan)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as f:
                uid = int(next(line for line in f if line.startswith(b"Uid:")).split()[1])
        except (OSError, ValueError, IndexError, StopIteration):
            continue
        if lo <= uid < hi:
            found.append(int(name))
    return found


def _kill_uids(lo: int, hi: int) -> None:
    """SIGKILL every process whose real uid is in ``[lo, hi)``."""
    for pid in processes_of(lo, hi):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
