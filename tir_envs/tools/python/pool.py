"""The local sandbox pool: fork servers, warm spare sessions, and every session's life cycle.

One pool per configuration per process (``get_pool``), shared by every env and thread.  It
starts lazily on the first ``open_session``, keeps ``spares`` interpreters forked and ready so
that opening a session costs nothing, and shuts down at interpreter exit.

Several fork servers serve one pool (``fork_servers``), each a process of its own and so with
its own string-hash secret (which a forked interpreter cannot change): each spare is forked
by a server chosen at random, each open draws a server at random, and a server retires once
``sessions_per_fork_server`` of its sessions were opened (it forks no more, its unused
sessions close, and it exits once its last session is gone) while a replacement starts in
the background.  The pool is ready with
its first server; the others start one at a time behind it (see docs/sandbox.md, "The
string hash seed").

All state lives on the reactor thread (``reactor.py``); the public methods only hand work to it
and return ``concurrent.futures.Future`` objects.  Every future is resolved by a timer if
nothing else resolves it, so a caller never waits forever: a run by its timeout plus the grace
period, an open by ``open_timeout_s``, a close after a few seconds.  A run's future always gets
a reply dict (never an exception): the interpreter's result, parsed and validated here
(``op="result"``, ``kind`` ok / error / timeout / cpu / memory), or one made up here from what
the host observed, with ``kind`` ``timeout`` / ``killed`` / ``protocol`` / ``infra``.

Trust: a reply is data from untrusted code.  It is bounded (frame cap from the output limit),
parsed without recursion, must carry the nonce of its request, and cannot choose a host
status: ``timeout`` counts only when the host interrupted the cell, ``infra`` only comes from
the host (fork server lost, spawn failure, shutdown, a session that could not be set up:
setup is a request of its own, acknowledged before any code of the model is sent, and no
frame is ever read as a setup outcome after that).  A session that dies between calls is
reported at its next call as ``killed`` (the model's outcome).  A result ends a call only
once the session is stopped (``cgroups.SessionCgroup.stop``) and the kernel shows the
interpreter waiting for its next request (``_check_over``): a frame the code wrote while its
cell runs ends nothing, and nothing of a session runs outside a call's deadline.
"""

from __future__ import annotations

import atexit
import collections
import concurrent.futures as cf
import itertools
import json
import logging
import os
import random
import resource
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from tir_envs.tools.base import SandboxUnavailable
from tir_envs.tools.python import launcher, syscall_filter
from tir_envs.tools.python.cgroups import CgroupTree, SessionCgroup
from tir_envs.tools.python.reactor import Reactor, get_reactor
from tir_envs.tools.python.sandbox import protocol
from tir_envs.tools.python.uids import UidPool
from tir_envs.validation import check_positive_int

__all__ = ["PoolConfig", "SandboxPool", "SandboxUnavailable", "SessionHandle", "get_pool",
           "shutdown_pools"]

log = logging.getLogger("tir_envs.sandbox")
MAX_HELLO = 64 * 1024    # the session's JSON hello (and setup error)
MAX_INFLIGHT_SPAWNS = 8
MAX_PARKED = 256         # idle stateless templates kept for later one-shot calls ...
PARKED_IDLE_S = 30.0     # ... each for this long at most
EXIT_WAIT_S = 1.0        # after a session's socket closes mid-run, wait this long for its exit status
CLOSE_WAIT_S = 5.0       # a close resolves after this even without the exit confirmation
START_FAILURES_BEFORE_BACKOFF = 3
BACKOFF_S = 10.0
QUICK_LOOKS = 4          # loop rounds a reply waits for its interpreter to block, before a stop


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
      episodes share one with probability about 1 / ``fork_servers``; each server costs
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


@dataclass
class _PendingCall:
    """The call a session is running: its future, deadline, caps and the nonce it must echo."""

    future: cf.Future
    timeout_s: float
    max_chars: int = 0
    nonce: int = 0
    interrupted: bool = False
    reply: dict | None = None   # the latest valid result, until the host sees the cell over
    recheck: Any = None
    looks: int = 0              # quick looks at the interpreter before stopping it to look
    timer: Any = None
    started: float = field(default_factory=time.monotonic)


class SessionHandle:
    """One interpreter owned by one episode.  Opaque: pass it back to the pool."""

    def __init__(self, sid: int, zygote: "_Zygote", sock: socket.socket):
        self.sid = sid
        self.zygote = zygote
        self.sock: socket.socket | None = sock
        self.decoder = protocol.Decoder(MAX_HELLO)
        self.state = "spawning"  # spawning ready idle running interrupting dead closing closed
        self.out = bytearray()
        self.run: _PendingCall | None = None
        self.queue: collections.deque = collections.deque()
        self.exit: dict | None = None
        self.close_futures: list[cf.Future] = []
        self.dead_reason: str | None = None
        self.configured = False
        self.info: dict = {}
        self.timer = None
        self.dying_run: _PendingCall | None = None  # the run during which the process died
        self.hang_timer = None
        self.counted = True      # occupies a max_sessions slot
        self.spawning = True
        self.cgroup: SessionCgroup | None = None
        self.runs = 0            # cells sent; 0: no code of the model has run in it yet
        self.fresh = False       # stateless: every cell runs in a fresh fork of the template
        self.uid: int | None = None  # the session's own host uid (see uids.py)
        self.parked = False      # a closed stateless template kept for the next one-shot call
        self.parked_at = 0.0
        self.key = ""            # its limits
        self.fault = "infra"     # who a death is charged to: "model" once its code has run

    @property
    def alive(self) -> bool:
        return self.state in ("ready", "idle", "running", "interrupting")

    def __repr__(self) -> str:
        return f"<SessionHandle sid={self.sid} state={self.state}>"


class _Zygote:
    """One fork server.  ``state``: starting, ready (forks sessions), retired (its share of
    sessions was opened: forks no more, exits once its sessions are gone), exited (that
    happened) or dead (it failed, crashed or the pool shut down)."""

    def __init__(self, mode: str, proc: subprocess.Popen, ctrl: socket.socket, errfile):
        self.mode = mode
        self.proc = proc
        self.ctrl = ctrl
        self.errfile = errfile
        self.state = "starting"
        self.info: dict = {}
        self.sessions: dict[int, SessionHandle] = {}  # until the server reports them gone
        self.forked = 0
        self.opened = 0  # sessions of it handed to an opener (a template counts once)
        self.quota = 1   # it retires once this many were
        self.timer = None

    @property
    def running(self) -> bool:
        """Its process is ours to talk to (its control socket is open)."""
        return self.state in ("starting", "ready", "retired")

    def describe(self) -> dict:
        return {"pid": self.proc.pid, "state": "serving" if self.state == "ready" else self.state,
                "sessions_forked": self.forked, "sessions_opened": self.opened,
                "live_sessions": len(self.sessions)}

    def stderr_tail(self, n: int = 2000) -> str:
        try:
            self.errfile.seek(0)
            return self.errfile.read().decode("utf-8", "replace")[-n:]
        except (OSError, ValueError):
            return ""


def _resolve(fut: cf.Future, value: Any) -> None:
    if not fut.done():
        try:
            fut.set_result(value)
        except cf.InvalidStateError:
            pass


def _fail(fut: cf.Future, exc: BaseException) -> None:
    if not fut.done():
        try:
            fut.set_exception(exc)
        except cf.InvalidStateError:
            pass


class SandboxPool:
    """See the module docstring.  Public methods are thread-safe and never block."""

    def __init__(self, config: PoolConfig | None = None, reactor: Reactor | None = None):
        self.config = config or PoolConfig()
        self.reactor = reactor or get_reactor()
        self._servers: list[_Zygote] = []  # running fork servers, oldest first
        self._spares: collections.deque[SessionHandle] = collections.deque()
        self._waiters: collections.deque = collections.deque()
        self._spawning = 0
        self._live = 0
        self._sids = itertools.count(1)
        self._failed_modes: dict[str, str] = {}
        self._mode: str | None = None
        self._start_failures = 0
        self._backoff_until = 0.0
        self._last_error = ""
        self._closed = False
        self._corpses: list[subprocess.Popen] = []
        self.counters: collections.Counter = collections.Counter()
        self._cap = self.config.session_cap
        self._cgroups: CgroupTree | None = None
        self._degraded: dict[str, str] = {}   # mechanism -> why it is not in use
        self._seccomp: str | None = None
        self._uids: UidPool | None = None
        self._nonces = random.Random(os.urandom(16))
        self._random = random.Random(os.urandom(16))  # which server forks, which spare goes
        self._prepared = False
        self._parked: dict[str, collections.deque[SessionHandle]] = {}
        self._parked_count = 0
        self._expiry = None
        _raise_fd_limit()

    # ================================================================ public API
    def open_session(self, fresh: bool = False, limits: dict | None = None) -> cf.Future:
        """A future of a ready ``SessionHandle`` (or ``SandboxUnavailable``).  With ``fresh``
        the session is stateless: each cell runs in a fresh fork of its untouched interpreter,
        and nothing the cell started or wrote outlives it; such a session, once closed, is
        kept (set up with ``limits``) for the next stateless open with the same limits."""
        fut: cf.Future = cf.Future()
        self.reactor.call_soon(self._open, fut, _limits_key(limits) if fresh else None)
        return fut

    def run(self, handle: SessionHandle, code: str, limits: dict, timeout_s: float,
            max_chars: int) -> cf.Future:
        """A future of the reply dict of one cell (see the module docstring)."""
        fut: cf.Future = cf.Future()
        self.reactor.call_soon(self._run, handle, fut, code, limits, timeout_s, max_chars)
        return fut

    def abandon(self, handle: SessionHandle, fut: cf.Future) -> None:
        """The caller stopped waiting for ``fut`` (e.g. its task was cancelled): if that cell
        is still running, end the session, since nobody will read its result."""
        self.reactor.call_soon(self._abandon, handle, fut)

    def close_session(self, handle: SessionHandle) -> cf.Future:
        """A future resolved once every process of the session is gone (or after a bound)."""
        fut: cf.Future = cf.Future()
        self.reactor.call_soon(self._close, handle, fut)
        return fut

    def close_idle_templates(self) -> cf.Future:
        """Close every idle stateless template now (they also close after ``PARKED_IDLE_S``
        unused); a future resolved once that is under way."""
        fut: cf.Future = cf.Future()

        def run() -> None:
            if self._expiry is not None:
                self._expiry.cancel()
            self._expire_parked(max_idle_s=-1.0)
            _resolve(fut, None)
        self.reactor.call_soon(run)
        return fut

    def info(self, timeout: float = 5.0) -> dict:
        fut: cf.Future = cf.Future()
        self.reactor.call_soon(lambda: _resolve(fut, self._info()))
        return fut.result(timeout)

    def wait_ready(self, timeout: float | None = None) -> dict:
        """Start the first fork server (if needed) and wait until it is ready (the others
        start behind it); returns ``info()``."""
        handle = self.open_session().result(timeout)
        self.close_session(handle).result(timeout)
        return self.info()

    def wait_all_servers(self, timeout: float = 300.0) -> dict:
        """``wait_ready``, then wait until ``fork_servers`` servers serve (for measurements
        and tests that need every server up); returns ``info()``."""
        deadline = time.monotonic() + timeout
        info = self.wait_ready(timeout)
        while sum(s["state"] == "serving" for s in info["fork_servers"]) < \
                self.config.fork_servers:
            if time.monotonic() > deadline:
                raise SandboxUnavailable(f"only {info['fork_servers']} of "
                                         f"{self.config.fork_servers} fork servers serve after "
                                         f"{timeout:g} s (last error: {self._last_error})")
            time.sleep(0.05)
            info = self.info()
        return info

    def shutdown(self, timeout: float = 3.0) -> None:
        """Stop the fork servers and every session; idempotent."""
        if self._closed:
            return
        fut: cf.Future = cf.Future()
        if self.reactor.alive and not self.reactor.in_thread():
            self.reactor.call_soon(lambda: _resolve(fut, self._shutdown()))
            try:
                fut.result(timeout)
            except cf.TimeoutError:
                self._shutdown()
        else:
            self._shutdown()
        for proc in list(self._corpses):
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
        if self._cgroups is not None:
            self._wait_sessions_gone(timeout)
            self._cgroups.remove()
        if self._uids is not None:
            self._uids.close()

    def _wait_sessions_gone(self, timeout: float) -> None:
        """Session processes die with the fork server; wait for them to leave the cgroups."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._cgroups.busy():
            time.sleep(0.02)

    # ================================================================ reactor thread
    @property
    def _zygote(self) -> _Zygote | None:
        """The newest ready fork server (else the newest running one, else None)."""
        ready = [z for z in self._servers if z.state == "ready"]
        return (ready or self._servers or [None])[-1]

    def _info(self) -> dict:
        z = self._zygote
        return {"isolation": z.mode if z else self._mode, "state": z.state if z else "stopped",
                "fork_server": dict(z.info) if z else {},
                "fork_servers": [s.describe() for s in self._servers],
                "spares": len(self._spares),
                "live_sessions": self._live, "spawning": self._spawning,
                "waiting": len(self._waiters), "failed_modes": dict(self._failed_modes),
                "idle_templates": self._parked_count,
                "counters": dict(self.counters), "config": {
                    "spares": self.config.target_spares,
                    "max_sessions": self._cap, "fork_servers": self.config.fork_servers,
                    "sessions_per_fork_server": self.config.sessions_per_fork_server},
                "cgroups": self._cgroups is not None,
                "seccomp": self._seccomp is not None and bool(z and z.info.get("seccomp")),
                "session_uids": bool(self._uids and z and z.info.get("session_uids")),
                "uids_in_use": len(self._uids.in_use) if self._uids else 0,
                "degraded": dict(self._degraded)}

    # ---------------------------------------------------------------- opening
    def _open(self, fut: cf.Future, key: str | None = None) -> None:
        """``key``: the limits of a stateless session (None: a stateful one).

        Each open draws a ready fork server uniformly at random and takes one of its idle
        templates with these limits (stateless), else one of its spares (which becomes its
        template); only when it has neither, any such template, else any spare, at random.
        So consecutive episodes (stateless calls included, which would otherwise reuse one
        template) land on servers drawn anew, each with its own string-hash secret, and
        one-shot calls made one after another settle on a template per server."""
        if not fut.set_running_or_notify_cancel():
            return
        ready = self._ready_servers()
        server = self._random.choice(ready) if ready else None
        stateless = key is not None
        if stateless and self._unpark(key, server, fut):
            return
        if self._closed:
            _fail(fut, SandboxUnavailable("the sandbox pool is shut down"))
            return
        if (self._open_spare(fut, key, server) or (stateless and self._unpark(key, None, fut))
                or self._open_spare(fut, key, None)):
            return
        if time.monotonic() < self._backoff_until and not self._ready_servers():
            _fail(fut, SandboxUnavailable(f"the sandbox is failing to start: {self._last_error}"))
            return
        timer = self.reactor.call_later(self.config.open_timeout_s, self._waiter_timeout, fut)
        self._waiters.append((fut, timer, key))
        self._top_up()

    def _waiter_timeout(self, fut: cf.Future) -> None:
        self._waiters = collections.deque(w for w in self._waiters if w[0] is not fut)
        _fail(fut, SandboxUnavailable(
            f"no sandbox session became available within {self.config.open_timeout_s:g} s "
            f"({self._live} alive of max_sessions={self._cap}; "
            f"last error: {self._last_error or 'none'})"))

    def _open_spare(self, fut: cf.Future, key: str | None, server: _Zygote | None) -> bool:
        """Open a spare of ``server`` (None: of any server) for ``fut``, if there is one."""
        while True:
            handle = self._pick(self._spares, server)
            if handle is None:
                return False
            if handle.state == "ready":
                self._give(handle, fut, key)
                self._top_up()
                return True

    def _hand_out(self, handle: SessionHandle) -> None:
        """A session just became ready: give it to the oldest waiter, or keep it spare (or
        close it: its server retired meanwhile)."""
        if handle.zygote.state != "ready":
            self._close(handle, cf.Future())
            return
        while self._waiters:
            fut, timer, key = self._waiters.popleft()
            timer.cancel()
            if not fut.done():
                self._give(handle, fut, key)
                return
        self._spares.append(handle)

    def _give(self, handle: SessionHandle, fut: cf.Future, key: str | None) -> None:
        """Open ``handle`` for a caller; its server retires once its share was opened."""
        handle.state, handle.fresh, handle.key = "idle", key is not None, key or ""
        _resolve(fut, handle)
        z = handle.zygote
        z.opened += 1
        if z.opened >= z.quota and z.state == "ready":
            self._retire(z)

    def _ready_servers(self) -> list[_Zygote]:
        return [z for z in self._servers if z.state == "ready"]

    def _top_up(self) -> None:
        """Keep the fork servers and the spares (and the waiters' sessions) coming."""
        if self._closed:
            return
        self._ensure_servers()
        if not self._ready_servers():
            return
        while True:  # recounted each time: a spawn may retire or lose its server
            want = (len(self._waiters) + self.config.target_spares - len(self._spares)
                    - self._spawning)
            room = self._cap - self._live
            while room < want and self._parked_count:  # idle templates give their slots back
                self._close(self._evict_parked(), cf.Future())
                room = self._cap - self._live
            ready = self._ready_servers()
            if min(want, room, MAX_INFLIGHT_SPAWNS - self._spawning) <= 0 or not ready:
                return
            self._spawn(self._random.choice(ready))

    def _spawn(self, z: _Zygote) -> None:
        sid = next(self._sids)
        cgroup, join_fds = self._session_cgroup(sid)
        host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        uid = self._uids.take() if self._uids and z.info.get("session_uids") else None
        try:
            socket.send_fds(z.ctrl, [json.dumps({"op": "spawn", "sid": sid,
                                                 "uid": uid}).encode()],
                            [child.fileno(), *join_fds])
        except OSError as e:
            host.close()
            self._uids and self._uids.give_back(uid)
            if cgroup is not None:
                cgroup.remove()
            self._zygote_died(z, f"cannot reach the fork server: {e}")
            return
        finally:
            child.close()
            for fd in join_fds:
                os.close(fd)
        host.setblocking(False)
        handle = SessionHandle(sid, z, host)
        handle.cgroup, handle.uid = cgroup, uid
        z.sessions[sid] = handle
        z.forked += 1
        self._spawning += 1
        self._live += 1
        self.counters["spawned"] += 1
        self.reactor.watch(host, lambda: self._on_readable(handle))
        handle.timer = self.reactor.call_later(self.config.ready_timeout_s, self._ready_timeout,
                                               handle)

    def _session_cgroup(self, sid: int) -> tuple[SessionCgroup | None, list[int]]:
        """The new session's cgroups and the descriptors its keeper joins them with."""
        if self._cgroups is None:
            return None, []
        try:
            cgroup = self._cgroups.session(sid)
        except OSError as e:
            self.counters["cgroup_failures"] += 1
            log.warning("python sandbox: cannot create a session cgroup: %s", e)
            return None, []
        try:
            return cgroup, cgroup.join_fds()
        except OSError as e:
            cgroup.remove()
            log.warning("python sandbox: cannot open a session cgroup: %s", e)
            return None, []

    def _ready_timeout(self, handle: SessionHandle) -> None:
        if handle.state == "spawning":
            self._last_error = "a session did not become ready in time"
            self._kill(handle, self._last_error)
            self._top_up()

    # ---------------------------------------------------------------- running
    def _run(self, handle: SessionHandle, fut: cf.Future, code: str, limits: dict,
             timeout_s: float, max_chars: int) -> None:
        if not fut.set_running_or_notify_cancel():
            return
        if handle.state in ("running", "interrupting", "configuring"):
            handle.queue.append((fut, code, limits, timeout_s, max_chars))
            return
        if handle.state != "idle":
            self._answer_dead(handle, fut)
            return
        self._start_run(handle, fut, code, limits, timeout_s, max_chars)

    def _start_run(self, handle: SessionHandle, fut: cf.Future, code: str, limits: dict,
                   timeout_s: float, max_chars: int) -> None:
        if not handle.configured:
            handle.queue.appendleft((fut, code, limits, timeout_s, max_chars))
            self._configure(handle, limits)
            return
        run = handle.run = _PendingCall(fut, timeout_s, int(max_chars),
                                        self._nonces.getrandbits(64))
        msg = {"op": "run", "code": code, "max_chars": run.max_chars, "nonce": run.nonce}
        handle.state = "running"
        handle.runs += 1
        handle.fault = "model"
        handle.decoder.max_frame = protocol.result_frame_cap(run.max_chars)
        run.timer = self.reactor.call_later(timeout_s, self._on_deadline, handle, run)
        self._send(handle, protocol.encode(msg))
        if handle.cgroup is not None:  # after the send: the interpreter wakes to its request
            handle.cgroup.cont()

    def _configure(self, handle: SessionHandle, limits: dict) -> None:
        """Set the session up before any code of the model is sent: its cgroup limits here,
        then its own limits and lock-down in the interpreter, acknowledged by a ``setup_ok``
        frame.  Until that frame arrives no code has run in the session, so what it says
        (and any failure on the way) is the sandbox's own: ``infra``.  After it, nothing the
        session writes is ever read as a setup outcome (see docs/sandbox.md, statuses)."""
        handle.configured = True
        handle.state = "configuring"
        if handle.cgroup is not None:
            try:
                handle.cgroup.set_limits(limits.get("memory_mb"), limits.get("nproc"))
            except OSError as e:
                self._kill(handle, f"cannot set the session's cgroup limits: {e}")
                return
        handle.decoder.max_frame = MAX_HELLO
        handle.timer = self.reactor.call_later(self.config.ready_timeout_s, self._setup_timeout,
                                               handle)
        self._send(handle, protocol.encode({"op": "setup", "limits": limits,
                                            "fresh": handle.fresh}))

    def _setup_timeout(self, handle: SessionHandle) -> None:
        if handle.state == "configuring":
            self._kill(handle, "the session did not acknowledge its setup in time")

    def _on_setup_reply(self, handle: SessionHandle, body: bytes) -> None:
        """The interpreter's answer to ``setup`` (no code of the model has run yet)."""
        handle.timer.cancel()
        msg = _parse_json(body)
        if msg is None or msg.get("op") != "setup_ok":
            error = str(msg.get("error"))[:500] if msg else "not a setup acknowledgement"
            self._kill(handle, f"session setup failed: {error}")
            return
        if msg.get("fresh_cells") is False and "fresh_cells" not in self._degraded:
            self._degrade("fresh_cells", str(msg.get("fresh_cells_error")), "a stateless call's "
                          "/tmp, /dev/shm, pid and IPC counters are shared with the calls before it")
        handle.state = "idle"
        handle.decoder.max_frame = 0  # nothing may arrive until the first request
        self._next_queued(handle)

    def _dead_reply(self, handle: SessionHandle) -> dict:
        """The reply to a call on a session that can run no more: the model's outcome when
        its code ran there and the fork server confirmed the exit, else infrastructure."""
        if handle.fault == "model" and handle.exit is not None and handle.zygote.state != "dead":
            ex = handle.exit
            return {"kind": "killed", "lost": True, "between_calls": True,
                    "signal": ex.get("signal") or ex.get("keeper_signal"), "code": ex.get("code")}
        return {"kind": "infra", "lost": True,
                "error": handle.dead_reason or f"the session is {handle.state}"}

    def _answer_dead(self, handle: SessionHandle, fut: cf.Future) -> None:
        """Answer a call on a dead session, waiting briefly for the fork server's word on how
        it ended when the model's code may be why."""
        if handle.fault == "model" and handle.exit is None and handle.zygote.state != "dead":
            run = _PendingCall(fut, 0.0)
            handle.dying_run = run
            self.reactor.call_later(EXIT_WAIT_S, self._finish_killed, handle, run)
            return
        _resolve(fut, self._dead_reply(handle))

    def _on_deadline(self, handle: SessionHandle, run: _PendingCall) -> None:
        if handle.run is not run:
            return
        grace = self.config.interrupt_grace_s
        if not run.interrupted and grace > 0:
            run.interrupted = True
            handle.state = "interrupting"
            self._signal(handle, "INT")
            run.timer = self.reactor.call_later(grace, self._on_deadline, handle, run)
            return
        handle.run = None
        self.counters["timeouts_killed"] += 1
        _resolve(run.future, {"kind": "timeout", "lost": True, "timeout_s": run.timeout_s})
        self._kill(handle, "killed after a timeout")

    def _on_result(self, handle: SessionHandle, run: _PendingCall, reply: dict) -> None:
        """A valid result frame.  The call ends only when the host sees the cell over: every
        process of the session stopped and the interpreter blocked reading its next request.
        A frame that came while the interpreter still runs (written by the code itself) ends
        nothing: the session runs on under the call's deadline, re-checked now and then."""
        run.reply = reply
        if run.recheck is None:
            self._check_over(handle, run, 0.001)

    def _check_over(self, handle: SessionHandle, run: _PendingCall, delay: float) -> None:
        run.recheck = None
        if handle.run is not run:
            return
        cgroup = handle.cgroup
        if cgroup is not None:
            # Usually the interpreter already waits when its result is read: seen so before
            # the SIGSTOP, it can run no code of the model after it (a stop lands before any
            # return to user space), and no wait for the stop to land is needed.
            before = cgroup.interpreter_state(settle=False)
            if before == "busy" and run.looks < QUICK_LOOKS:
                # Replies are read the moment they are written, usually before the interpreter
                # has blocked for its next request.  Look again once this round's other events
                # are handled (no timer: epoll waits whole milliseconds): it has blocked by
                # then, and no SIGSTOP had to land first.
                run.looks += 1
                run.recheck = self.reactor.call_later(0, self._check_over, handle, run, delay)
                return
            cgroup.stop()
            state = before if before in ("waiting", "unknown") else cgroup.interpreter_state()
            if state in ("busy", "unsettled"):
                self.counters[f"results_while_{state}"] += 1
                if state == "busy":  # not over: let it run on (the deadline still holds)
                    cgroup.cont()
                run.recheck = self.reactor.call_later(delay, self._check_over, handle, run,
                                                      min(2 * delay, 0.05))
                return
        self._finish_run(handle, run.reply)

    def _finish_run(self, handle: SessionHandle, reply: dict) -> None:
        """The cell is over (the session stopped, when it has cgroups): answer.  The status
        the reply claims is only taken where the host agrees (``timeout`` needs an interrupt)."""
        run, handle.run = handle.run, None
        if run.timer:
            run.timer.cancel()
        kind = reply["kind"]
        if run.interrupted and kind in ("timeout", "error"):
            reply = {**reply, "kind": "timeout", "timeout_s": run.timeout_s}
        elif kind == "timeout":
            reply = {**reply, "kind": "error"}
        handle.state = "idle"
        handle.decoder.max_frame = 0  # nothing may arrive until the next request
        _resolve(run.future, reply)
        self._next_queued(handle)

    def _next_queued(self, handle: SessionHandle) -> None:
        while handle.queue and handle.state == "idle":
            fut, code, limits, timeout_s, max_chars = handle.queue.popleft()
            if not fut.done():
                self._start_run(handle, fut, code, limits, timeout_s, max_chars)

    def _abandon(self, handle: SessionHandle, fut: cf.Future) -> None:
        if handle.run is not None and handle.run.future is fut:
            handle.run = None
            _resolve(fut, {"kind": "infra", "lost": True, "error": "the call was abandoned"})
            self._kill(handle, "the call was abandoned while running")
        else:
            handle.queue = collections.deque(q for q in handle.queue if q[0] is not fut)
            _resolve(fut, {"kind": "infra", "lost": True, "error": "the call was abandoned"})

    # ---------------------------------------------------------------- socket events
    def _send(self, handle: SessionHandle, data: bytes) -> None:
        handle.out += data
        self._flush(handle)

    def _flush(self, handle: SessionHandle) -> None:
        sock = handle.sock
        if sock is None:
            return
        try:
            while handle.out:
                n = sock.send(handle.out)
                del handle.out[:n]
        except BlockingIOError:
            self.reactor.watch(sock, lambda: self._on_readable(handle),
                               lambda: self._flush(handle))
            return
        except OSError:
            self._on_eof(handle)
            return
        self.reactor.watch(sock, lambda: self._on_readable(handle))

    def _on_readable(self, handle: SessionHandle) -> None:
        sock = handle.sock
        if sock is None:
            return
        try:
            data = sock.recv(1 << 18)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._on_eof(handle)
            return
        handle.decoder.push(data)
        while handle.sock is not None:  # each frame checked against the cap of the state
            try:                        # the previous one led to
                body = handle.decoder.pop()
            except protocol.ProtocolError as e:
                self._violation(handle, str(e))
                return
            if body is None:
                return
            self._on_frame(handle, body)

    def _on_frame(self, handle: SessionHandle, body: bytes) -> None:
        """One frame body from a session, validated before anything believes it."""
        run = handle.run
        if handle.state == "spawning":
            hello = _parse_hello(body)
            if hello is None:
                self._violation(handle, "the hello is not a JSON object with op 'ready'")
                return
            handle.timer.cancel()
            handle.state, handle.info, handle.spawning = "ready", hello, False
            if handle.cgroup is not None:
                handle.cgroup.find_keeper()
            self._spawning -= 1
            self._hand_out(handle)
            self._top_up()
        elif handle.state == "configuring":
            self._on_setup_reply(handle, body)
        elif handle.state in ("running", "interrupting") and run is not None:
            try:
                reply = protocol.decode_result(body, protocol.field_cap(run.max_chars))
            except protocol.ProtocolError as e:
                self._violation(handle, str(e))
                return
            if reply["nonce"] != run.nonce:
                self._violation(handle, "a result for another request (written by the code?)")
                return
            self._on_result(handle, run, reply)
        else:
            self._violation(handle, f"unexpected message while {handle.state}")

    def _violation(self, handle: SessionHandle, why: str) -> None:
        """The session sent something invalid: its code tampered with the channel (the
        model's outcome, ``killed``) or, before any code ran, it is broken."""
        self.counters["protocol_violations"] += 1
        run, handle.run = handle.run, None
        if run is not None:
            _resolve(run.future, {"kind": "protocol", "lost": True,
                                  "error": f"the interpreter broke the protocol ({why})"})
        self._kill(handle, f"protocol violation: {why}")

    def _on_eof(self, handle: SessionHandle) -> None:
        """The session's socket closed: its interpreter is gone (or closed the socket)."""
        self._drop_socket(handle)
        run, handle.run = handle.run, None
        was = handle.state
        if was in ("dead", "closing", "closed"):
            return
        self._mark_dead(handle, "the interpreter exited between calls")
        self._signal(handle, "TERM")  # in case it only closed the socket
        self._watch_exit(handle)
        if run is not None:
            if run.timer:
                run.timer.cancel()
            handle.dead_reason = "the interpreter died during a call"
            handle.dying_run = run
            if handle.exit is not None:
                self._finish_killed(handle, run)
            else:
                self.reactor.call_later(EXIT_WAIT_S, self._finish_killed, handle, run)
        self._top_up()

    def _finish_killed(self, handle: SessionHandle, run: _PendingCall) -> None:
        """A session died during (or before) a call: the model's outcome, unless the fork
        server is gone (then nobody can tell, and it is ours)."""
        handle.dying_run = None
        if run.future.done():
            return
        if handle.zygote.state == "dead" or handle.fault != "model":
            _resolve(run.future, {"kind": "infra", "lost": True,
                                  "error": handle.dead_reason or "the fork server died"})
            return
        ex = handle.exit or {}
        _resolve(run.future, {"kind": "killed", "lost": True,
                              "signal": ex.get("signal") or ex.get("keeper_signal"),
                              "code": ex.get("code"), "timed_out": run.interrupted})

    # ---------------------------------------------------------------- ending sessions
    def _drop_socket(self, handle: SessionHandle) -> None:
        if handle.sock is not None:
            self.reactor.watch(handle.sock, None)
            handle.sock.close()
            handle.sock = None

    def _mark_dead(self, handle: SessionHandle, reason: str) -> None:
        """The session can run no more cells; free its slot if nobody owns it."""
        if handle.timer is not None:
            handle.timer.cancel()
        if handle.spawning:
            handle.spawning = False
            self._spawning -= 1
        unowned = handle.state in ("spawning", "ready") or handle.parked
        self._forget_parked(handle)
        handle.state, handle.dead_reason = "dead", handle.dead_reason or reason
        try:
            self._spares.remove(handle)
        except ValueError:
            pass
        if unowned:
            self._release(handle)
        for fut, *_ in handle.queue:
            _resolve(fut, self._dead_reply(handle))
        handle.queue.clear()

    def _release(self, handle: SessionHandle) -> None:
        if handle.counted:
            handle.counted = False
            self._live -= 1

    def _kill(self, handle: SessionHandle, reason: str) -> None:
        """End a session now (SIGTERM to its keeper, escalated by the fork server)."""
        self._drop_socket(handle)
        if handle.state not in ("dead", "closing", "closed"):
            self._mark_dead(handle, reason)
        self._signal(handle, "TERM")
        self._watch_exit(handle)

    def _watch_exit(self, handle: SessionHandle) -> None:
        """Expect the session's exit report; its absence for long means a hung fork server."""
        if handle.exit is None and handle.hang_timer is None:
            handle.hang_timer = self.reactor.call_later(self.config.unresponsive_s,
                                                        self._check_exited, handle)

    # ---------------------------------------------------------------- stateless templates
    def _park(self, handle: SessionHandle) -> bool:
        """Keep a closed stateless session for the next one-shot call with the same limits:
        after each cell it is back to its untouched state (see ``interpreter.fresh_cell``)."""
        if (not handle.fresh or handle.parked or handle.state != "idle" or handle.queue
                or handle.zygote.state != "ready" or self._closed
                or self._parked_count >= MAX_PARKED or not handle.key):
            return False
        handle.parked, handle.parked_at = True, time.monotonic()
        self._parked.setdefault(handle.key, collections.deque()).append(handle)
        self._parked_count += 1
        if self._expiry is None:
            self._expiry = self.reactor.call_later(PARKED_IDLE_S / 2, self._expire_parked)
        return True

    def _expire_parked(self, max_idle_s: float = PARKED_IDLE_S) -> None:
        """Close templates idle for longer than ``max_idle_s`` (their memory and slots)."""
        self._expiry = None
        oldest_allowed = time.monotonic() - max_idle_s
        for parked in self._parked.values():
            while parked and parked[0].parked_at <= oldest_allowed:
                handle = parked.popleft()
                handle.parked, handle.fresh = False, False
                self._parked_count -= 1
                self._close(handle, cf.Future())
        if self._parked_count and not self._closed:
            self._expiry = self.reactor.call_later(PARKED_IDLE_S / 2, self._expire_parked)

    def _unpark(self, key: str, server: _Zygote | None, fut: cf.Future) -> bool:
        """Hand out one of ``server``'s (None: any server's) templates parked with these
        limits (see ``_open``)."""
        parked = self._parked.get(key, ())
        while True:
            handle = self._pick(parked, server)
            if handle is None:
                return False
            handle.parked = False
            self._parked_count -= 1
            if handle.state == "idle" and handle.zygote.state == "ready":
                _resolve(fut, handle)
                return True
            handle.fresh = False
            self._close(handle, cf.Future())

    def _pick(self, handles: collections.deque, server: _Zygote | None) -> SessionHandle | None:
        """Remove and return one of ``server``'s ``handles`` (None: any of them) at random,
        or None.  The rest keep their order (parked templates expire oldest first)."""
        mine = [i for i, h in enumerate(handles) if server is None or h.zygote is server]
        if not mine:
            return None
        i = self._random.choice(mine)
        handle = handles[i]
        del handles[i]
        return handle

    def _evict_parked(self) -> SessionHandle:
        key = next(k for k, q in self._parked.items() if q)
        handle = self._parked[key].popleft()
        handle.parked, handle.fresh = False, False
        self._parked_count -= 1
        return handle

    def _forget_parked(self, handle: SessionHandle) -> None:
        if handle.parked:
            handle.parked = False
            self._parked[handle.key].remove(handle)
            self._parked_count -= 1

    def _close(self, handle: SessionHandle, fut: cf.Future) -> None:
        if not fut.set_running_or_notify_cancel():
            return
        if not isinstance(handle, SessionHandle):
            _resolve(fut, None)
            return
        if self._park(handle):
            _resolve(fut, None)
            return
        run, handle.run = handle.run, None
        if run is not None:
            _resolve(run.future, {"kind": "infra", "lost": True, "error": "session closed"})
        for q in handle.queue:
            _resolve(q[0], {"kind": "infra", "lost": True, "error": "session closed"})
        handle.queue.clear()
        self._drop_socket(handle)
        self._release(handle)
        if handle.timer is not None:
            handle.timer.cancel()
        if handle.state == "closed" or handle.exit is not None or handle.zygote.state == "dead":
            handle.state = "closed"
            _resolve(fut, None)
        else:
            handle.state = "closing"
            handle.close_futures.append(fut)
            self._signal(handle, "TERM")
            handle.timer = self.reactor.call_later(CLOSE_WAIT_S, self._settle_close, handle)
            self._watch_exit(handle)
        self._top_up()

    def _check_exited(self, handle: SessionHandle) -> None:
        """A session we ended long ago was never reported gone: the fork server is hung."""
        if handle.exit is None and handle.zygote.state in ("ready", "retired"):
            self._zygote_died(handle.zygote, "the fork server stopped answering")
        self._settle_close(handle)

    def _settle_close(self, handle: SessionHandle) -> None:
        if handle.state == "closing":
            handle.state = "closed"
        for fut in handle.close_futures:
            _resolve(fut, None)
        handle.close_futures.clear()

    def _signal(self, handle: SessionHandle, sig: str) -> None:
        if handle.cgroup is not None and sig != "INT":
            handle.cgroup.cont()  # the keeper, if it could not be told apart, was stopped too
        z = handle.zygote
        if not z.running:
            return
        try:
            z.ctrl.send(json.dumps({"op": "signal", "sid": handle.sid, "sig": sig}).encode())
        except OSError as e:
            self._zygote_died(z, f"cannot reach the fork server: {e}")

    # ---------------------------------------------------------------- fork server
    def _modes(self) -> list[str]:
        if self.config.isolation != "auto":
            return [self.config.isolation]
        if self._mode:
            return [self._mode]
        modes = [m for m in launcher.MODES if m != "bwrap" or launcher.bwrap_path()]
        return [m for m in modes if m not in self._failed_modes]

    def _ensure_servers(self) -> None:
        """Keep ``fork_servers`` servers serving, starting one at a time: the first when
        someone waits for a session (the pool is ready with it), the others in the background
        once one is ready, and a replacement for each that retires or dies (never while
        backing off from failed starts)."""
        if any(z.state == "starting" for z in self._servers):
            return
        started = self._mode is not None  # a server of this pool was ready once
        wanted = self.config.fork_servers if started else int(bool(self._waiters))
        if len(self._ready_servers()) < wanted and time.monotonic() >= self._backoff_until:
            self._start_server()

    def _start_server(self) -> None:
        """Launch a fork server in the first isolation mode that can (see ``_modes``)."""
        for mode in self._modes():
            try:
                self._servers.append(self._start_zygote(mode))
                return
            except Exception as e:  # noqa: BLE001 - a mode that cannot even launch
                self._mode_failed(mode, f"{type(e).__name__}: {e}")
        self._give_up()

    def _retire(self, z: _Zygote) -> None:
        """``z``'s share of sessions was opened: it forks no more and a replacement starts.
        Its sessions in use run on; its spares and idle templates close now, as does a spare
        of it that becomes ready later (no session of it is opened any more); it exits once
        its last session is gone."""
        z.state = "retired"
        self.counters["fork_servers_retired"] += 1
        for handle in [h for h in self._spares if h.zygote is z]:
            self._spares.remove(handle)
            self._close(handle, cf.Future())
        for handle in [h for h in z.sessions.values() if h.parked]:
            self._forget_parked(handle)
            handle.fresh = False
            self._close(handle, cf.Future())
        self._top_up()

    def _exit_if_done(self, z: _Zygote) -> None:
        """A retired server whose sessions are all gone: close its control socket, on which
        it exits (it kills nothing: nothing of it is left)."""
        if z.state != "retired" or z.sessions:
            return
        z.state = "exited"
        self._servers.remove(z)
        self.reactor.watch(z.ctrl, None)
        z.ctrl.close()
        z.errfile.close()
        self._corpses.append(z.proc)
        self.reactor.call_later(1.0, self._reap_corpses)

    def _prepare(self) -> None:
        """Once per pool: the cgroup subtree and the seccomp filter, or a warning saying what
        will not hold without them (see docs/sandbox.md)."""
        if self._prepared:
            return
        self._prepared = True
        self._cgroups, why = CgroupTree.create()
        self._degrade("cgroups", why, "memory is limited per process (RLIMIT_AS) only, kernel "
                      "memory (memfd, tmpfs, pipes) is not counted, and only child processes "
                      "(not threads) are stopped between calls")
        self._uids, why = UidPool.create()
        self._degrade("uids", why, "per-user kernel quotas (descriptors in flight, pipe "
                      "buffers, inotify) are shared by all sessions")
        self._seccomp, why = syscall_filter.cached_bpf()
        self._degrade("seccomp", why, "keyrings are still fresh per session, but AF_VSOCK and "
                      "other socket families, inotify, file locks and pipe growth are not denied")

    _WITHOUT = {"cgroups": "per-session cgroups", "uids": "a host uid per session",
                "seccomp": "a seccomp filter", "fresh_cells": "namespaces per stateless call"}

    def _degrade(self, key: str, why: str | None, consequence: str) -> None:
        """Record a protection this host cannot give (``why``) and warn what no longer holds."""
        if not why:
            return
        self._degraded[key] = why
        log.warning("python sandbox without %s (%s): %s; see docs/sandbox.md",
                    self._WITHOUT[key], why, consequence)

    def _start_zygote(self, mode: str) -> _Zygote:
        self._prepare()
        host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        errfile = tempfile.TemporaryFile()
        options = {"seccomp_bpf": self._seccomp, "stop_others": self._cgroups is None,
                   "self_test_uid": self._uids.self_test if self._uids else None}
        try:
            spec = launcher.launch_spec(mode, child.fileno(), self.config.preload,
                                        self.config.disk_mb, self.config.extra_binds,
                                        self.config.ready_timeout_s, options)
            proc = subprocess.Popen(spec.argv, env=spec.env, pass_fds=[child.fileno()],
                                    stdin=subprocess.DEVNULL, stdout=errfile, stderr=errfile,
                                    start_new_session=True)
        except BaseException:
            host.close()
            errfile.close()
            raise
        finally:
            child.close()
        host.setblocking(False)
        z = _Zygote(mode, proc, host, errfile)
        # Between M/2 and M (``sessions_per_fork_server``) opened sessions, at random:
        # servers started together do not all retire at once (their replacements start
        # one at a time).
        m = self.config.sessions_per_fork_server
        z.quota = self._random.randint((m + 1) // 2, m)
        self.reactor.watch(host, lambda: self._on_control(z))
        z.timer = self.reactor.call_later(self.config.start_timeout_s, self._start_timeout, z)
        self.counters["fork_server_starts"] += 1
        return z

    def _start_timeout(self, z: _Zygote) -> None:
        if z.state == "starting":
            self._zygote_died(z, f"the fork server did not start within "
                                 f"{self.config.start_timeout_s:g} s")

    def _on_control(self, z: _Zygote) -> None:
        while True:
            try:
                data = z.ctrl.recv(1 << 16)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                self._zygote_died(z, "the fork server exited")
                return
            try:
                msg = json.loads(data)
            except ValueError:
                continue
            self._on_control_message(z, msg)
            if not z.running:
                return

    def _on_control_message(self, z: _Zygote, msg: dict) -> None:
        op = msg.get("op")
        if op == "ready":
            z.timer.cancel()
            z.state, z.info = "ready", msg
            self._mode, self._start_failures, self._backoff_until = z.mode, 0, 0.0
            log.info("python sandbox ready: isolation=%s uid=%s", z.mode, msg.get("uid"))
            if len(self._ready_servers()) == 1:
                self._warn_weakened(z)
            self._top_up()
        elif op == "failed":
            self._zygote_died(z, msg.get("error", "the fork server failed to start"))
        elif op in ("exited", "spawn_failed"):
            handle = z.sessions.pop(msg.get("sid"), None)
            if handle is not None:
                self._on_gone(handle, msg)
            self._exit_if_done(z)

    def _warn_weakened(self, z: _Zygote) -> None:
        """What the first ready server says that weakens the guarantees (see docs)."""
        msg = z.info
        if self._seccomp is not None and not msg.get("seccomp"):
            self._degraded["seccomp"] = "the kernel refused the filter"
            log.warning("python sandbox: sessions could not install the seccomp filter "
                        "(kernel without seccomp filters?); see docs/sandbox.md")
        if z.mode == "rlimits":
            log.warning("python sandbox without namespaces (isolation=rlimits): code can "
                        "read the host's files and reach the network%s; see docs/sandbox.md",
                        ", and runs as root" if msg.get("uid") == 0 else "")

    def _on_gone(self, handle: SessionHandle, msg: dict) -> None:
        """The fork server reports a session's process gone (or never started)."""
        if msg.get("op") == "exited":
            handle.exit = msg
            self._on_session_exit(handle)
        else:
            self._last_error = f"spawn failed: {msg.get('error')}"
            self._drop_socket(handle)
            self._mark_dead(handle, self._last_error)

    def _on_session_exit(self, handle: SessionHandle) -> None:
        for timer in (handle.hang_timer, handle.timer if handle.state == "closing" else None):
            if timer is not None:
                timer.cancel()
        self._remove_cgroup(handle)
        if handle.dying_run is not None:
            self._finish_killed(handle, handle.dying_run)
        if handle.state in ("dead", "closing", "closed"):
            self._settle_close(handle)
        # a live session whose process exited: its socket EOF does the rest

    def _remove_cgroup(self, handle: SessionHandle, tries: int = 20) -> None:
        """Remove the session's cgroups once its processes are gone (retried while busy)."""
        cgroup = handle.cgroup
        if cgroup is None:
            self._give_back_uid(handle)
            return
        if cgroup.remove():
            handle.cgroup = None
            self._give_back_uid(handle)
        elif tries > 0:
            self.reactor.call_later(0.25, self._remove_cgroup, handle, tries - 1)
        else:
            self.counters["cgroups_left"] += 1

    def _give_back_uid(self, handle: SessionHandle) -> None:
        """The session's processes are gone (its cgroup removed, or its exit reported and
        its pid namespace with it): its uid may serve another session."""
        if self._uids is not None:
            self._uids.give_back(handle.uid)
        handle.uid = None

    def _zygote_died(self, z: _Zygote, reason: str) -> None:
        """A fork server failed, crashed or hung: its sessions (only its) are lost."""
        if not z.running:
            return
        was_starting = z.state == "starting"
        z.state = "dead"
        self._servers.remove(z)
        if z.timer is not None:
            z.timer.cancel()
        self.reactor.watch(z.ctrl, None)
        z.ctrl.close()
        if z.proc.poll() is None:
            z.proc.kill()
        self._corpses.append(z.proc)
        self.reactor.call_later(1.0, self._reap_corpses)
        detail = f"{reason}; {z.stderr_tail().strip()}".strip("; ")
        z.errfile.close()
        self._last_error = detail
        self.counters["fork_server_deaths"] += 1
        for handle in list(z.sessions.values()):
            self._session_lost(handle, f"sandbox infrastructure failure: {reason}")
            self._remove_cgroup(handle)
        z.sessions.clear()
        if was_starting:
            self._mode_failed(z.mode, detail)
        self._top_up()  # a replacement (at once if someone waits), spares from the others

    def _session_lost(self, handle: SessionHandle, reason: str) -> None:
        """The fork server is gone: nobody can say how the session ended, so it is ours."""
        handle.fault = "infra"
        run, handle.run = handle.run, None
        self._drop_socket(handle)
        if handle.state not in ("dead", "closing", "closed"):
            self._mark_dead(handle, reason)
        if run is not None:
            _resolve(run.future, {"kind": "infra", "lost": True, "error": reason})
        self._settle_close(handle)

    def _mode_failed(self, mode: str, why: str) -> None:
        log.warning("python sandbox: isolation %r unavailable: %s", mode, why)
        self._last_error = why
        if self.config.isolation == "auto" and self._mode is None:
            self._failed_modes[mode] = why
        else:
            self._start_failures += 1
            if self._start_failures >= START_FAILURES_BEFORE_BACKOFF:
                self._give_up()

    def _give_up(self) -> None:
        """Starts keep failing: back off for a while, and fail the waiters unless a ready
        server will serve them."""
        self._backoff_until = time.monotonic() + BACKOFF_S
        self._start_failures = 0
        self._failed_modes.clear()
        if self._ready_servers():
            return
        waiters, self._waiters = self._waiters, collections.deque()
        for fut, timer, _ in waiters:
            timer.cancel()
            _fail(fut, SandboxUnavailable(f"the python sandbox cannot start: {self._last_error}"))

    def _reap_corpses(self) -> None:
        self._corpses = [p for p in self._corpses if p.poll() is None]
        if self._corpses:
            self.reactor.call_later(1.0, self._reap_corpses)

    def _shutdown(self) -> None:
        self._closed = True
        for fut, timer, _ in self._waiters:
            timer.cancel()
            _fail(fut, SandboxUnavailable("the sandbox pool is shut down"))
        self._waiters.clear()
        servers, self._servers = self._servers, []
        for z in servers:
            for handle in list(z.sessions.values()):
                if handle.cgroup is not None:
                    handle.cgroup.cont()  # stopped processes act on nothing but SIGKILL
                self._session_lost(handle, "the sandbox pool is shut down")
            z.state = "dead"
            try:
                self.reactor.watch(z.ctrl, None)
            except (OSError, ValueError):
                pass
            z.ctrl.close()  # the fork server kills every session and exits on EOF
            z.errfile.close()
            self._corpses.append(z.proc)
        self._spares.clear()


def _limits_key(limits: dict | None) -> str:
    return json.dumps(limits or {}, sort_keys=True)


def _parse_json(body: bytes) -> dict | None:
    """A small JSON object from the sandbox (only ever read before any code of the model
    ran in it), or None if it is anything else."""
    if not body.startswith(b"{"):
        return None
    try:
        msg = json.loads(body)
    except Exception:  # noqa: BLE001 - RecursionError included
        return None
    return msg if isinstance(msg, dict) else None


def _parse_hello(body: bytes) -> dict | None:
    """The session's ``ready`` message, or None if it is anything else."""
    msg = _parse_json(body)
    return msg if msg is not None and msg.get("op") == "ready" else None


def _raise_fd_limit() -> None:
    """One socket per session: lift the soft open-files limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 1 << 20), hard))
        except (ValueError, OSError):
            pass


_POOLS: dict[PoolConfig, SandboxPool] = {}
_POOLS_LOCK = threading.Lock()


def get_pool(config: PoolConfig | None = None) -> SandboxPool:
    """The process-wide pool for ``config`` (created on first use; nothing starts yet)."""
    config = config or PoolConfig()
    with _POOLS_LOCK:
        pool = _POOLS.get(config)
        if pool is None or pool._closed:
            pool = _POOLS[config] = SandboxPool(config)
        return pool


def shutdown_pools() -> None:
    """Stop every pool of this process (also run at interpreter exit)."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for pool in pools:
        try:
            pool.shutdown()
        except Exception:  # noqa: BLE001 - exit must go on
            log.exception("sandbox pool shutdown failed")


def _forget_after_fork() -> None:
    """In a forked child the pools belong to the parent: drop them (and our copies of their
    sockets) without touching the parent's processes."""
    global _POOLS_LOCK
    for pool in _POOLS.values():
        pool._closed = True
        for z in pool._servers:
            for handle in z.sessions.values():
                if handle.sock is not None:
                    handle.sock.close()
            z.ctrl.close()
    _POOLS.clear()
    _POOLS_LOCK = threading.Lock()


atexit.register(shutdown_pools)
os.register_at_fork(after_in_child=_forget_after_fork)
