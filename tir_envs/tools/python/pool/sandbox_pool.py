"""The local sandbox pool: fork servers, warm spare sessions, and every session's life cycle.

One pool per configuration per process (``get_pool``), shared by every env and thread.  It
starts lazily on the first ``open_session``, keeps ``spares`` interpreters forked and ready so
that opening a session costs nothing, and shuts down at interpreter exit.

Several fork servers serve one pool (``fork_servers``), each a process of its own and so with
its own string-hash secret (which a forked interpreter cannot change): spares spread evenly
over the servers, each open draws a server uniformly and only that server serves it, and a
server retires once ``sessions_per_fork_server`` of its sessions were opened (it forks no
more, its unused sessions close, and it exits once its last session is gone) while a
replacement starts in the background.  The pool serves once its first ``fork_servers``
servers all do (the first starts alone, the others together; see docs/sandbox.md, "The
string hash seed").

All state lives on the reactor thread (``reactor.py``); the public methods only hand work to it
and return ``concurrent.futures.Future`` objects.  Every future is resolved by a timer if
nothing else resolves it, so a caller never waits forever: a run by its timeout plus the grace
period, an open by ``open_timeout_s``, a close after a few seconds.  A run's future always gets
a reply dict (never an exception): the interpreter's result, parsed and validated here
(``op="result"``, ``status`` ok / error / timeout / killed with its ``limit``), or one made up
here from what the host observed, with ``status`` ``timeout`` / ``killed`` (a ``cause``:
``flood``, ``protocol``) / ``infra_error``: words of the one ``Status`` vocabulary.

The rooms: the fork servers (``fork_servers.py``), idle stateless templates
(``templates.py``), a session's state machine (``session.py``), how one call runs and how its
end is observed (``calls.py``: statuses the host alone decides), what this host can enforce
(``protections.py``), and every message of the wire (``sandbox/protocol.py``, ``Op``).
``infra_error`` only comes from the host (fork server lost, spawn failure, shutdown, a session that
could not be set up: setup is a request of its own, acknowledged before any code of the model
is sent, and no frame is ever read as a setup outcome after that).  A session that dies
between calls is reported at its next call as ``killed`` (the model's outcome).
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
import threading
import time
from dataclasses import dataclass
from typing import Any

from tir_envs.status import Status
from tir_envs.tools.base import SandboxUnavailable
from tir_envs.tools.python.pool.calls import SessionCalls, resolve
from tir_envs.tools.python.isolation.cgroups import SessionCgroup
from tir_envs.tools.python.pool.fork_servers import ForkServer, ForkServerFleet, ForkServerState
from tir_envs.tools.python.pool.config import PoolConfig
from tir_envs.tools.python.isolation.protections import Protections
from tir_envs.tools.python.pool.reactor import Reactor, get_reactor
from tir_envs.tools.python.sandbox import protocol
from tir_envs.tools.python.sandbox.protocol import Op
from tir_envs.tools.python.pool.session import ENDED, SessionHandle, SessionState
from tir_envs.tools.python.pool.templates import TemplateShelf, take_one

__all__ = ["PoolConfig", "SandboxPool", "SandboxUnavailable", "SessionHandle", "get_pool",
           "shutdown_pools"]

log = logging.getLogger("tir_envs.sandbox")
S = SessionState
MAX_INFLIGHT_SPAWNS = 8
CLOSE_WAIT_S = 5.0       # a close resolves after this even without the exit confirmation


@dataclass(eq=False)
class Waiter:
    """An open waiting for a session of ``server`` (None: not drawn yet, see ``_open``)."""

    future: cf.Future
    timer: Any
    key: str | None
    server: ForkServer | None


def _fail(fut: cf.Future, exc: BaseException) -> None:
    if not fut.done():
        try:
            fut.set_exception(exc)
        except cf.InvalidStateError:
            pass


#: how long ``shutdown`` waits at most for killed sessions to leave their cgroups
SESSIONS_GONE_S = 10.0


class SandboxPool(SessionCalls):
    """See the module docstring.  Public methods are thread-safe and never block."""

    def __init__(self, config: PoolConfig | None = None, reactor: Reactor | None = None):
        self.config = config or PoolConfig()
        self.reactor = reactor or get_reactor()
        self._spares: collections.deque[SessionHandle] = collections.deque()
        self._waiters: collections.deque = collections.deque()
        self._spawning = 0
        self._live = 0
        self._sids = itertools.count(1)
        self._closed = False
        self.counters: collections.Counter = collections.Counter()
        self._cap = self.config.session_cap
        self.protections = Protections()
        self._nonces = random.Random(os.urandom(16))
        self._random = random.Random(os.urandom(16))  # which server forks, which spare goes
        self.fleet = ForkServerFleet(self.config, self.reactor, self, self.counters,
                                     self._random)
        self.templates = TemplateShelf(self.reactor, lambda h: self._close(h, cf.Future()),
                                       lambda: self._closed, self._random)
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
            self.templates.expire(max_idle_s=-1.0)
            resolve(fut, None)
        self.reactor.call_soon(run)
        return fut

    def info(self, timeout: float = 5.0) -> dict:
        fut: cf.Future = cf.Future()
        self.reactor.call_soon(lambda: resolve(fut, self._info()))
        return fut.result(timeout)

    def warm(self) -> cf.Future:
        """Start the fork servers now, in the background (a future of nothing, resolved once
        the pool serves).  A command that will need a session a few seconds from now (after
        loading a tokenizer, building an env) starts this first, so its first tool call finds
        the servers ready and their spares forked instead of waiting for the preload imports.
        It opens one session to start them (a pool starts on demand) and closes it."""
        done: cf.Future = cf.Future()

        def opened(fut: cf.Future) -> None:
            if fut.exception() is not None:
                resolve(done, None)
                return
            self.close_session(fut.result()).add_done_callback(lambda _: resolve(done, None))
        self.open_session().add_done_callback(opened)
        return done

    def wait_ready(self, timeout: float | None = None) -> dict:
        """Start the fork servers (if needed) and wait until the pool serves (its first
        ``fork_servers`` servers all ready); returns ``info()``."""
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
                                         f"{timeout:g} s (last error: {self.fleet.last_error})")
            time.sleep(0.05)
            info = self.info()
        return info

    def shutdown(self, timeout: float = 3.0) -> None:
        """Stop the fork servers and every session; idempotent."""
        if self._closed:
            return
        fut: cf.Future = cf.Future()
        if self.reactor.alive and not self.reactor.in_thread():
            self.reactor.call_soon(lambda: resolve(fut, self._shutdown()))
            try:
                fut.result(timeout)
            except cf.TimeoutError:
                self._shutdown()
        else:
            self._shutdown()
        for proc in list(self.fleet.corpses):
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
        if self.protections.cgroups is not None:
            # killed sessions leave their cgroups as the kernel reaps them, slower on a loaded
            # machine; removing a busy cgroup fails and would leave it behind
            self._wait_sessions_gone(max(timeout, SESSIONS_GONE_S))
            self.protections.cgroups.remove()
        if self.protections.uids is not None:
            self.protections.uids.close()

    def _wait_sessions_gone(self, timeout: float) -> None:
        """Session processes die with the fork server; wait for them to leave the cgroups."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.protections.cgroups.busy():
            time.sleep(0.02)

    # ================================================================ reactor thread
    @property
    def _fork_server(self) -> ForkServer | None:
        """The newest ready fork server (else the newest running one, else None)."""
        return self.fleet.newest

    def _info(self) -> dict:
        z, guard = self.fleet.newest, self.protections
        return {"isolation": z.mode if z else self.fleet.mode,
                "state": str(z.state) if z else "stopped",
                "fork_server": dict(z.info) if z else {},
                "fork_servers": [s.describe() for s in self.fleet.servers],
                "spares": len(self._spares),
                "live_sessions": self._live, "spawning": self._spawning,
                "waiting": len(self._waiters), "failed_modes": dict(self.fleet.failed_modes),
                "idle_templates": self.templates.count,
                "counters": dict(self.counters), "config": {
                    "spares": self.config.target_spares,
                    "max_sessions": self._cap, "fork_servers": self.config.fork_servers,
                    "sessions_per_fork_server": self.config.sessions_per_fork_server},
                "cgroups": guard.cgroups is not None,
                "freezer": bool(guard.cgroups and guard.cgroups.freezer),
                "seccomp": guard.seccomp is not None and bool(z and z.info.get("seccomp")),
                "session_uids": bool(guard.uids and z and z.info.get("session_uids")),
                "uids_in_use": len(guard.uids.in_use) if guard.uids else 0,
                "degraded": dict(guard.degraded)}

    # ---------------------------------------------------------------- opening
    def _open(self, fut: cf.Future, key: str | None = None) -> None:
        """``key``: the limits of a stateless session (None: a stateful one).

        Each open draws a fork server uniformly at random among the ``fork_servers`` ready
        ones and is served by that server only: one of its idle templates with these limits
        (stateless), else one of its spares (which becomes its template), else its next new
        session.  So two episodes (stateless calls included, which would otherwise reuse one
        template) share a server, and its string-hash secret, with probability 1/K, and
        one-shot calls made one after another settle on a template per server.  Until the
        pool's first K servers all serve, opens wait (undrawn): a new pool's first batch is
        spread like any later one."""
        if not fut.set_running_or_notify_cancel():
            return
        server = self._draw()
        if server is not None and key is not None and self._unpark(key, server, fut):
            return
        if self._closed:
            _fail(fut, SandboxUnavailable("the sandbox pool is shut down"))
            return
        if server is not None and self._open_spare(fut, key, server):
            return
        if self.fleet.backing_off():
            _fail(fut, SandboxUnavailable(f"the sandbox is failing to start: "
                                          f"{self.fleet.last_error}"))
            return
        timer = self.reactor.call_later(self.config.open_timeout_s, self._waiter_timeout, fut)
        self._waiters.append(Waiter(fut, timer, key, server))
        self._top_up()

    def _draw(self) -> ForkServer | None:
        """A ready server drawn uniformly, or None while the fleet is not complete yet."""
        ready = self.fleet.ready()
        return self._random.choice(ready) if ready and self.fleet.complete else None

    def _waiter_timeout(self, fut: cf.Future) -> None:
        self._waiters = collections.deque(w for w in self._waiters if w.future is not fut)
        _fail(fut, SandboxUnavailable(
            f"no sandbox session became available within {self.config.open_timeout_s:g} s "
            f"({self._live} alive of max_sessions={self._cap}; "
            f"last error: {self.fleet.last_error or 'none'})"))

    def _serve_waiters(self) -> None:
        """Draw a server for each waiter that has none (the fleet just became complete, or
        its server was lost), and serve each from its server's templates or spares."""
        for w in list(self._waiters):
            if w not in self._waiters:  # served meanwhile (a retirement serves them too)
                continue
            if w.future.done():
                self._waiters.remove(w)
                continue
            if w.server is None or w.server.state is not ForkServerState.READY:
                w.server = self._draw()
            if w.server is None:
                continue
            at = self._waiters.index(w)
            del self._waiters[at]  # first: serving it tops up, which must not count it
            if ((w.key is not None and self._unpark(w.key, w.server, w.future))
                    or self._open_spare(w.future, w.key, w.server)):
                w.timer.cancel()
            else:
                self._waiters.insert(min(at, len(self._waiters)), w)

    def _open_spare(self, fut: cf.Future, key: str | None, server: ForkServer) -> bool:
        """Open a spare of ``server`` for ``fut``, if there is one."""
        while True:
            handle = take_one(self._spares, server, self._random)
            if handle is None:
                return False
            if handle.state is S.READY:
                self._give(handle, fut, key)
                self._top_up()
                return True

    def _unpark(self, key: str, server: ForkServer, fut: cf.Future) -> bool:
        """Hand out one of ``server``'s idle templates with these limits, if there is one."""
        handle = self.templates.unpark(key, server)
        if handle is None:
            return False
        resolve(fut, handle)
        return True

    def _hand_out(self, handle: SessionHandle) -> None:
        """A session just became ready: give it to the oldest waiter that drew its server,
        or keep it spare (or close it: its server retired meanwhile)."""
        z = handle.fork_server
        if z.state is not ForkServerState.READY:
            self._close(handle, cf.Future())
            return
        for w in list(self._waiters):
            if w.future.done():
                self._waiters.remove(w)
            elif w.server is z:
                self._waiters.remove(w)
                w.timer.cancel()
                self._give(handle, w.future, w.key)
                return
        self._spares.append(handle)

    def _give(self, handle: SessionHandle, fut: cf.Future, key: str | None) -> None:
        """Open ``handle`` for a caller; its server retires once its share was opened."""
        handle.move(S.IDLE)
        handle.fresh, handle.key = key is not None, key or ""
        resolve(fut, handle)
        z = handle.fork_server
        z.opened += 1
        if z.opened >= z.quota and z.state is ForkServerState.READY:
            self.fleet.retire(z)

    def _top_up(self) -> None:
        """Keep the fork servers and the spares (and the waiters' sessions) coming."""
        if self._closed:
            return
        self.fleet.ensure(someone_waits=bool(self._waiters))
        while self._spawning < MAX_INFLIGHT_SPAWNS:  # recounted each time: a spawn may
            server, for_waiter = self._spawn_target()  # retire or lose its server
            if server is None:
                return
            while self._cap <= self._live and self.templates.count:
                self._close(self.templates.evict(), cf.Future())  # idle templates give
            if self._cap <= self._live:                           # their slots back
                if for_waiter and self._close_a_spare_nobody_drew():
                    continue
                return
            self._spawn(server)

    def _close_a_spare_nobody_drew(self) -> bool:
        """At ``max_sessions``, waiters wait for their own servers: a spare of a server no
        waiter drew gives its slot back (False: there is none)."""
        drawn = {w.server for w in self._waiters}
        spares = [h for h in self._spares if h.fork_server not in drawn]
        if not spares:
            return False
        handle = self._random.choice(spares)
        self._spares.remove(handle)
        self._close(handle, cf.Future())
        return True

    def _spawn_target(self) -> tuple[ForkServer | None, bool]:
        """The ready server the next session is forked by, and whether a waiter needs it.

        First a server that waiters drew and whose sessions on the way do not cover them;
        else, while the spares are short of ``spares``, the server with the fewest spares and
        spares on the way (ties at random), so spares spread evenly; before the fleet is
        complete none gets more than its share of them (when the rest come up, their share
        is still theirs to fork).  Waiters not drawn yet (the fleet is not complete) are
        served once they draw.  ``(None, False)``: nothing to fork now."""
        ready = self.fleet.ready()
        if not ready:
            return None, False
        drew = {z: 0 for z in ready}
        for w in self._waiters:
            if w.server in drew:
                drew[w.server] += 1
        short = {z: n - z.spawning for z, n in drew.items() if n > z.spawning}
        if short:
            most = max(short.values())
            return self._random.choice([z for z, n in short.items() if n == most]), True
        extra = {z: max(0, z.spawning - n) for z, n in drew.items()}  # spawns for spares
        if self.config.target_spares - len(self._spares) - sum(extra.values()) <= 0:
            return None, False
        have = dict(extra)
        for h in self._spares:
            if h.fork_server in have:
                have[h.fork_server] += 1
        if not self.fleet.complete:
            share = -(-self.config.target_spares // self.config.fork_servers)
            have = {z: n for z, n in have.items() if n < share}
            if not have:
                return None, False
        low = min(have.values())
        return self._random.choice([z for z, n in have.items() if n == low]), False

    def _spawn(self, z: ForkServer) -> None:
        sid = next(self._sids)
        cgroup, join_fds = self._session_cgroup(sid)
        host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        uids = self.protections.uids
        uid = uids.take() if uids and z.info.get("session_uids") else None
        try:
            self.fleet.spawn(z, sid, uid, [child.fileno(), *join_fds])
        except OSError as e:
            host.close()
            uids and uids.give_back(uid)
            if cgroup is not None:
                cgroup.remove()
            self.fleet.died(z, f"cannot reach the fork server: {e}")
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
        z.spawning += 1
        self._spawning += 1
        self._live += 1
        self.counters["spawned"] += 1
        self.reactor.watch(host, lambda: self._on_readable(handle))
        handle.timer = self.reactor.call_later(self.config.ready_timeout_s, self._ready_timeout,
                                               handle)

    def _session_cgroup(self, sid: int) -> tuple[SessionCgroup | None, list[int]]:
        """The new session's cgroups and the descriptors its keeper joins them with."""
        if self.protections.cgroups is None:
            return None, []
        try:
            cgroup = self.protections.cgroups.session(sid)
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
        if handle.state is S.SPAWNING:
            self.fleet.last_error = "a session did not become ready in time"
            self._kill(handle, self.fleet.last_error)
            self._top_up()

    def _on_hello(self, handle: SessionHandle, body: bytes) -> None:
        """A new session's first frame: its hello, then it is a spare (or a waiter's)."""
        hello = protocol.parse_small_json(body)
        if hello is None or hello.get("op") != Op.READY:
            self._violation(handle, "the hello is not a JSON object with op 'ready'")
            return
        handle.timer.cancel()
        handle.move(S.READY)
        handle.info, handle.spawning = hello, False
        if handle.cgroup is not None:
            handle.cgroup.find_keeper()
        self._spawning -= 1
        handle.fork_server.spawning -= 1
        self._hand_out(handle)
        self._top_up()

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
            handle.fork_server.spawning -= 1
        unowned = handle.state in (S.SPAWNING, S.READY) or handle.parked
        self.templates.forget(handle)
        handle.move(S.DEAD)
        handle.dead_reason = handle.dead_reason or reason
        try:
            self._spares.remove(handle)
        except ValueError:
            pass
        if unowned:
            self._release(handle)
        for fut, *_ in handle.queue:
            resolve(fut, self._dead_reply(handle))
        handle.queue.clear()

    def _release(self, handle: SessionHandle) -> None:
        if handle.counted:
            handle.counted = False
            self._live -= 1

    def _kill(self, handle: SessionHandle, reason: str) -> None:
        """End a session now (SIGTERM to its keeper, escalated by the fork server)."""
        self._drop_socket(handle)
        if handle.state not in ENDED:
            self._mark_dead(handle, reason)
        self._signal(handle, "TERM")
        self._watch_exit(handle)

    def _watch_exit(self, handle: SessionHandle) -> None:
        """Expect the session's exit report; its absence for long means a hung fork server."""
        if handle.exit is None and handle.hang_timer is None:
            handle.hang_timer = self.reactor.call_later(self.config.unresponsive_s,
                                                        self._check_exited, handle)

    # ---------------------------------------------------------------- closing
    def _close(self, handle: SessionHandle, fut: cf.Future) -> None:
        if not fut.set_running_or_notify_cancel():
            return
        if not isinstance(handle, SessionHandle):
            resolve(fut, None)
            return
        if self.templates.park(handle):
            resolve(fut, None)
            return
        run, handle.run = handle.run, None
        if run is not None:
            resolve(run.future, {"status": Status.INFRA_ERROR, "lost": True, "error": "session closed"})
        for q in handle.queue:
            resolve(q[0], {"status": Status.INFRA_ERROR, "lost": True, "error": "session closed"})
        handle.queue.clear()
        self._drop_socket(handle)
        self._release(handle)
        if handle.timer is not None:
            handle.timer.cancel()
        if (handle.state is S.CLOSED or handle.exit is not None
                or handle.fork_server.state is ForkServerState.DEAD):
            handle.move(S.CLOSED)
            resolve(fut, None)
        else:
            handle.move(S.CLOSING)
            handle.close_futures.append(fut)
            self._signal(handle, "TERM")
            handle.timer = self.reactor.call_later(CLOSE_WAIT_S, self._settle_close, handle)
            self._watch_exit(handle)
        self._top_up()

    def _check_exited(self, handle: SessionHandle) -> None:
        """A session we ended long ago was never reported gone: the fork server is hung."""
        if handle.exit is None and handle.fork_server.state in (ForkServerState.READY,
                                                                ForkServerState.RETIRED):
            self.fleet.died(handle.fork_server, "the fork server stopped answering")
        self._settle_close(handle)

    def _settle_close(self, handle: SessionHandle) -> None:
        if handle.state is S.CLOSING:
            handle.move(S.CLOSED)
        for fut in handle.close_futures:
            resolve(fut, None)
        handle.close_futures.clear()

    def _signal(self, handle: SessionHandle, sig: str) -> None:
        if handle.cgroup is not None and sig != "INT":
            handle.cgroup.cont()  # the keeper, if it could not be told apart, was stopped too
        self.fleet.signal(handle.fork_server, handle.sid, sig)

    # ---------------------------------------------------------------- fleet events
    def launch_options(self) -> dict:
        return self.protections.launch_options()

    def server_ready(self, server: ForkServer, first: bool) -> None:
        if first:
            self.protections.check_first_server(server.mode, server.info)
        self._serve_waiters()
        self._top_up()

    def top_up(self) -> None:
        self._serve_waiters()  # those that drew a server now lost draw again
        self._top_up()

    def session_gone(self, handle: SessionHandle, msg: dict) -> None:
        """The fork server reports a session's process gone (or never started)."""
        if msg.get("op") == Op.EXITED:
            handle.exit = msg
            self._on_session_exit(handle)
        else:
            self.fleet.last_error = f"spawn failed: {msg.get('error')}"
            self._drop_socket(handle)
            self._mark_dead(handle, self.fleet.last_error)

    def server_lost(self, server: ForkServer, reason: str) -> None:
        """A fork server died: its sessions (only its) are lost."""
        for handle in list(server.sessions.values()):
            self._session_lost(handle, f"sandbox infrastructure failure: {reason}")
            self._remove_cgroup(handle)

    def server_retired(self, server: ForkServer) -> None:
        """Its sessions in use run on; its spares and idle templates close now, as does a
        spare of it that becomes ready later (no session of it is opened any more); it exits
        once its last session is gone."""
        for handle in [h for h in self._spares if h.fork_server is server]:
            self._spares.remove(handle)
            self._close(handle, cf.Future())
        self.templates.close_of(server)
        self._serve_waiters()  # those that drew it draw again
        self._top_up()

    def cannot_start(self, why: str) -> None:
        waiters, self._waiters = self._waiters, collections.deque()
        for w in waiters:
            w.timer.cancel()
            _fail(w.future, SandboxUnavailable(why))

    def _on_session_exit(self, handle: SessionHandle) -> None:
        for timer in (handle.hang_timer, handle.timer if handle.state is S.CLOSING else None):
            if timer is not None:
                timer.cancel()
        self._remove_cgroup(handle)
        if handle.dying_run is not None:
            self._finish_killed(handle, handle.dying_run)
        if handle.state in ENDED:
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
        if self.protections.uids is not None:
            self.protections.uids.give_back(handle.uid)
        handle.uid = None

    def _session_lost(self, handle: SessionHandle, reason: str) -> None:
        """The fork server is gone: nobody can say how the session ended, so it is ours."""
        handle.fault = "infra"
        run, handle.run = handle.run, None
        self._drop_socket(handle)
        if handle.state not in ENDED:
            self._mark_dead(handle, reason)
        if run is not None:
            resolve(run.future, {"status": Status.INFRA_ERROR, "lost": True, "error": reason})
        self._settle_close(handle)

    def _shutdown(self) -> None:
        self._closed = True
        for w in self._waiters:
            w.timer.cancel()
            _fail(w.future, SandboxUnavailable("the sandbox pool is shut down"))
        self._waiters.clear()
        for z in self.fleet.shutdown():
            for handle in list(z.sessions.values()):
                if handle.cgroup is not None:
                    handle.cgroup.cont()  # stopped processes act on nothing but SIGKILL
                self._session_lost(handle, "the sandbox pool is shut down")
            self.fleet.close_server(z)
        self._spares.clear()


def _limits_key(limits: dict | None) -> str:
    return json.dumps(limits or {}, sort_keys=True)


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
        for z in pool.fleet.servers:
            for handle in z.sessions.values():
                if handle.sock is not None:
                    handle.sock.close()
            z.ctrl.close()
    _POOLS.clear()
    _POOLS_LOCK = threading.Lock()


atexit.register(shutdown_pools)
os.register_at_fork(after_in_child=_forget_after_fork)
