"""Pool-wide settings of the local sandbox pool (per-session limits travel with each session).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from tir_envs.tools.python.pool import launcher
from tir_envs.validation import check_positive_int


def default_spares() -> int:
    """Warm interpreters kept ready: 4 per CPU, at most 32 (each costs a few MB)."""
    return min(32, 4 * (os.cpu_count() or 1))


def default_max_sessions() -> int:
    """Live sessions allowed: one per 32 MB of available memory (a session that ran some
    sympy holds about 17 MB of its own), between 16 and 4096."""
    try:
        with open("/proc/meminfo") as f:
            avail_kb = next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return 256
    return max(16, min(4096, avail_kb // (32 * 1024)))


@dataclass(frozen=True)
class PoolConfig:
    """Pool-wide settings (per-session limits travel with each session instead).

    * ``isolation``: ``auto`` (strongest available), ``bwrap``, ``unshare`` or ``rlimits``.
    * ``spares``: interpreters kept forked and ready (default ``default_spares()``).
    * ``max_sessions``: sessions alive at once (spares included; default
      ``default_max_sessions()``); ``open_session`` waits for a free slot up to
      ``open_timeout_s``.
    * ``preload``: modules imported once in the fork server.
    * ``disk_mb``: size of each session's private ``/tmp``.
    * ``interrupt_grace_s``: after a timeout, how long an interrupted cell may take to stop
      before the session is killed.
    * ``unresponsive_s``: a session we ended and the fork server never reported gone after
      this long means the fork server is hung: it is killed and restarted.
    * ``fork_servers``: fork servers kept serving, each with its own string-hash secret (two
      episodes share one with probability 1 / ``fork_servers``; each server costs
      about 52 MB of memory, PSS).
    * ``sessions_per_fork_server``: sessions of a fork server opened before it retires (so
      one hash secret is in at most this many sessions; a new server costs about 0.45 s
      CPU).
    """

    isolation: str = "auto"
    spares: int | None = None
    max_sessions: int | None = None
    preload: tuple[str, ...] = launcher.DEFAULT_PRELOAD
    disk_mb: int = 64
    extra_binds: tuple[str, ...] = ()
    interrupt_grace_s: float = 1.0
    start_timeout_s: float = 180.0
    ready_timeout_s: float = 60.0
    open_timeout_s: float = 180.0
    unresponsive_s: float = 30.0
    fork_servers: int = 4
    sessions_per_fork_server: int = 1000

    def __post_init__(self) -> None:
        if self.isolation not in ("auto", *launcher.MODES):
            raise ValueError(f"isolation must be 'auto', 'bwrap', 'unshare' or 'rlimits', "
                             f"got {self.isolation!r}")
        if self.spares is not None and (not isinstance(self.spares, int) or self.spares < 0):
            raise ValueError(f"spares must be a non-negative integer or None, got {self.spares!r}")
        check_positive_int(max_sessions=self.max_sessions, allow_none=True)
        check_positive_int(disk_mb=self.disk_mb)
        check_positive_int(fork_servers=self.fork_servers, hint="1 or more: 1 shares one "
                           "string-hash secret between all sessions, each more costs ~52 MB")
        check_positive_int(sessions_per_fork_server=self.sessions_per_fork_server,
                           hint="1 or more: sessions of one fork server opened before it retires "
                           "(each retirement costs a new server, ~0.45 s CPU)")
        if self.interrupt_grace_s < 0:
            raise ValueError(f"interrupt_grace_s must be >= 0, got {self.interrupt_grace_s!r}")
        object.__setattr__(self, "preload", tuple(self.preload))
        object.__setattr__(self, "extra_binds", tuple(self.extra_binds))

    @property
    def target_spares(self) -> int:
        return default_spares() if self.spares is None else self.spares

    @property
    def session_cap(self) -> int:
        return default_max_sessions() if self.max_sessions is None else self.max_sessions
