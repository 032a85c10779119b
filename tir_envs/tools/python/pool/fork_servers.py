"""The pool's fork servers: starting them, keeping ``fork_servers`` serving, retiring them.

A fork server (``sandbox/zygote.py``) is a process that imported the preloads once and forks
every session of the pool; each has its own string-hash secret, so a pool runs several and
each retires after its share of sessions (see docs/sandbox.md, "The string hash seed").
The fleet talks to them over their control sockets (messages: ``protocol.Op``) and tells
its owner, the pool, what happened to their sessions through the ``FleetOwner`` hooks.
Everything here runs on the reactor thread.
"""

from __future__ import annotations

import enum
import json
import logging
import random
import socket
import subprocess
import tempfile
import time
from typing import TYPE_CHECKING, Protocol

from tir_envs.tools.python.isolation.causes import explain
from tir_envs.tools.python.pool import launcher
from tir_envs.tools.python.pool.reactor import Reactor
from tir_envs.tools.python.sandbox.protocol import Op

if TYPE_CHECKING:  # pragma: no cover
    from tir_envs.tools.python.pool.config import PoolConfig
    from tir_envs.tools.python.pool.session import SessionHandle

log = logging.getLogger("tir_envs.sandbox")
START_FAILURES_BEFORE_BACKOFF = 3
BACKOFF_S = 10.0


class ForkServerState(str, enum.Enum):
    """A fork server's life (a ``str``, so it compares and prints as its name)."""

    STARTING = "starting"  # launched, not ready yet
    READY = "ready"        # forks sessions ("serving" in ``info()``)
    RETIRED = "retired"    # its share of sessions was opened: forks no more
    EXITED = "exited"      # retired and its last session gone: told to exit
    DEAD = "dead"          # failed, crashed, hung, or the pool shut down

    def __str__(self) -> str:
        return self.value


F = ForkServerState
SERVER_TRANSITIONS: dict[ForkServerState, frozenset[ForkServerState]] = {
    F.STARTING: frozenset({F.READY, F.DEAD}),
    F.READY: frozenset({F.RETIRED, F.DEAD}),
    F.RETIRED: frozenset({F.EXITED, F.DEAD}),
    F.EXITED: frozenset(),
    F.DEAD: frozenset(),
}
RUNNING = frozenset({F.STARTING, F.READY, F.RETIRED})


class ForkServer:
    """One fork server process and its control socket."""

    def __init__(self, mode: str, proc: subprocess.Popen, ctrl: socket.socket, errfile):
        self.mode = mode
        self.proc = proc
        self.ctrl = ctrl
        self.errfile = errfile
        self._state = F.STARTING
        self.info: dict = {}
        self.sessions: dict[int, SessionHandle] = {}  # until the server reports them gone
        self.forked = 0
        self.opened = 0  # sessions of it handed to an opener (a template counts once)
        self.quota = 1   # it retires once this many were
        self.spawning = 0  # sessions forked that have not said hello yet
        self.timer = None

    @property
    def state(self) -> ForkServerState:
        return self._state

    def move(self, new: ForkServerState) -> None:
        """Change state, refusing any transition ``SERVER_TRANSITIONS`` does not list."""
        if new not in SERVER_TRANSITIONS[self._state]:
            raise RuntimeError(f"fork server {self.proc.pid}: {self._state} -> {new} is not a "
                               f"transition of the fork server state machine")
        self._state = new

    @property
    def running(self) -> bool:
        """Its process is ours to talk to (its control socket is open)."""
        return self._state in RUNNING

    def send(self, op: Op, fds: tuple[int, ...] = (), **fields) -> None:
        """One control message (raises ``OSError`` when the server cannot be reached)."""
        data = json.dumps({"op": op, **fields}).encode()
        if fds:
            socket.send_fds(self.ctrl, [data], list(fds))
        else:
            self.ctrl.send(data)

    def describe(self) -> dict:
        return {"pid": self.proc.pid, "state": "serving" if self._state is F.READY else
                str(self._state), "sessions_forked": self.forked, "sessions_opened": self.opened,
                "live_sessions": len(self.sessions)}

    def stderr_tail(self, n: int = 2000) -> str:
        try:
            self.errfile.seek(0)
            return self.errfile.read().decode("utf-8", "replace")[-n:]
        except (OSError, ValueError):
            return ""


class FleetOwner(Protocol):
    """What the fleet tells the pool (all on the reactor thread)."""

    def launch_options(self) -> dict: ...
    def server_ready(self, server: ForkServer, first: bool) -> None: ...
    def session_gone(self, handle: "SessionHandle", msg: dict) -> None: ...
    def server_lost(self, server: ForkServer, reason: str) -> None: ...
    def server_retired(self, server: ForkServer) -> None: ...
    def cannot_start(self, why: str) -> None: ...
    def top_up(self) -> None: ...


class ForkServerFleet:
    """The running fork servers (oldest first) and how new ones start."""

    def __init__(self, config: "PoolConfig", reactor: Reactor, owner: FleetOwner,
                 counters, rand: random.Random):
        self.config = config
        self.reactor = reactor
        self.owner = owner
        self.counters = counters
        self.random = rand
        self.servers: list[ForkServer] = []
        self.mode: str | None = None          # the isolation mode a server was ready in
        self.failed_modes: dict[str, str] = {}
        self.start_failures = 0
        self.backoff_until = 0.0
        self.last_error = ""
        self.corpses: list[subprocess.Popen] = []
        # Until ``fork_servers`` serve at once for the first time, the pool hands out no
        # session (a new pool's first episodes would all share the first server's secret);
        # also set once a later start fails, so that a host that cannot run them all serves.
        self.complete = False

    # ---------------------------------------------------------------- queries
    def ready(self) -> list[ForkServer]:
        return [z for z in self.servers if z.state is F.READY]

    @property
    def newest(self) -> ForkServer | None:
        """The newest ready fork server (else the newest running one, else None)."""
        return (self.ready() or self.servers or [None])[-1]

    def backing_off(self) -> bool:
        return time.monotonic() < self.backoff_until and not self.ready()

    # ---------------------------------------------------------------- starting
    def ensure(self, someone_waits: bool) -> None:
        """Keep ``fork_servers`` servers serving: the first when someone waits for a
        session (it picks the isolation mode), then all the others at once (the pool serves
        once they all do), later a replacement for each that retires or dies, one at a time
        in the background (never while backing off from failed starts)."""
        if time.monotonic() < self.backoff_until:
            return
        starting = sum(z.state is F.STARTING for z in self.servers)
        if self.mode is None:  # no server of this pool was ready yet
            if not starting and someone_waits:
                self._start_any()
            return
        missing = self.config.fork_servers - len(self.ready()) - starting
        for _ in range(missing if not self.complete else int(missing > 0 and not starting)):
            self._start_any()

    def _modes(self) -> list[str]:
        if self.config.isolation != "auto":
            return [self.config.isolation]
        if self.mode:
            return [self.mode]
        if launcher.bwrap_path() is None and "bwrap" not in self.failed_modes:
            self.failed_modes["bwrap"] = explain("bwrap", "bubblewrap (bwrap) is not installed")
            log.info("python sandbox: isolation 'bwrap' skipped: %s", self.failed_modes["bwrap"])
        return [m for m in launcher.MODES if m not in self.failed_modes]

    def _start_any(self) -> None:
        """Launch a fork server in the first isolation mode that can (see ``_modes``)."""
        for mode in self._modes():
            try:
                self.servers.append(self._launch(mode))
                return
            except Exception as e:  # noqa: BLE001 - a mode that cannot even launch
                self._mode_failed(mode, f"{type(e).__name__}: {e}")
        self._give_up()

    def _launch(self, mode: str) -> ForkServer:
        options = self.owner.launch_options()
        host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        errfile = tempfile.TemporaryFile()
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
        z = ForkServer(mode, proc, host, errfile)
        # Between M/2 and M (``sessions_per_fork_server``) opened sessions, at random:
        # servers started together do not all retire at once (their replacements start
        # one at a time).
        m = self.config.sessions_per_fork_server
        z.quota = self.random.randint((m + 1) // 2, m)
        self.reactor.watch(host, lambda: self._on_control(z))
        z.timer = self.reactor.call_later(self.config.start_timeout_s, self._start_timeout, z)
        self.counters["fork_server_starts"] += 1
        return z

    def _start_timeout(self, z: ForkServer) -> None:
        if z.state is F.STARTING:
            self.died(z, f"the fork server did not start within "
                         f"{self.config.start_timeout_s:g} s")

    # ---------------------------------------------------------------- control socket
    def _on_control(self, z: ForkServer) -> None:
        while True:
            try:
                data = z.ctrl.recv(1 << 16)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                self.died(z, "the fork server exited")
                return
            try:
                msg = json.loads(data)
            except ValueError:
                continue
            self._on_message(z, msg)
            if not z.running:
                return

    def _on_message(self, z: ForkServer, msg: dict) -> None:
        op = msg.get("op")
        if op == Op.READY:
            z.timer.cancel()
            z.move(F.READY)
            z.info = msg
            self.mode, self.start_failures, self.backoff_until = z.mode, 0, 0.0
            if len(self.ready()) >= self.config.fork_servers:
                self.complete = True
            log.info("python sandbox ready: isolation=%s uid=%s", z.mode, msg.get("uid"))
            self.owner.server_ready(z, first=len(self.ready()) == 1)
        elif op == Op.FAILED:
            self.died(z, msg.get("error", "the fork server failed to start"))
        elif op in (Op.EXITED, Op.SPAWN_FAILED):
            handle = z.sessions.pop(msg.get("sid"), None)
            if handle is not None:
                self.owner.session_gone(handle, msg)
            self.exit_if_done(z)

    def spawn(self, z: ForkServer, sid: int, uid: int | None, fds: list[int]) -> None:
        """Ask ``z`` to fork session ``sid`` on the passed descriptors (raises ``OSError``)."""
        z.send(Op.SPAWN, tuple(fds), sid=sid, uid=uid)

    def signal(self, z: ForkServer, sid: int, sig: str) -> None:
        """Ask ``z`` to signal session ``sid``'s keeper (``TERM``, escalated by the server,
        or ``INT``)."""
        if not z.running:
            return
        try:
            z.send(Op.SIGNAL, sid=sid, sig=sig)
        except OSError as e:
            self.died(z, f"cannot reach the fork server: {e}")

    # ---------------------------------------------------------------- endings
    def retire(self, z: ForkServer) -> None:
        """``z``'s share of sessions was opened: it forks no more and a replacement starts
        (the owner closes its spares and idle templates)."""
        z.move(F.RETIRED)
        self.counters["fork_servers_retired"] += 1
        self.owner.server_retired(z)

    def exit_if_done(self, z: ForkServer) -> None:
        """A retired server whose sessions are all gone: close its control socket, on which
        it exits (it kills nothing: nothing of it is left)."""
        if z.state is not F.RETIRED or z.sessions:
            return
        z.move(F.EXITED)
        self.servers.remove(z)
        self.reactor.watch(z.ctrl, None)
        z.ctrl.close()
        z.errfile.close()
        self._bury(z.proc)

    def died(self, z: ForkServer, reason: str) -> None:
        """A fork server failed, crashed or hung: its sessions (only its) are lost."""
        if not z.running:
            return
        was_starting = z.state is F.STARTING
        z.move(F.DEAD)
        self.servers.remove(z)
        if z.timer is not None:
            z.timer.cancel()
        self.reactor.watch(z.ctrl, None)
        z.ctrl.close()
        if z.proc.poll() is None:
            z.proc.kill()
        self._bury(z.proc)
        detail = f"{reason}; {z.stderr_tail().strip()}".strip("; ")
        z.errfile.close()
        self.last_error = detail
        self.counters["fork_server_deaths"] += 1
        self.owner.server_lost(z, reason)
        z.sessions.clear()
        if was_starting:
            self._mode_failed(z.mode, detail)
        self.owner.top_up()  # a replacement (at once if someone waits), spares from the others

    def _mode_failed(self, mode: str, why: str) -> None:
        """A server failed to start in ``mode``: warn with the cause and its fix
        (``isolation.causes``), and under ``auto`` fall back to the next mode."""
        explained = explain(mode, why)
        fallback = self.config.isolation == "auto" and self.mode is None
        log.warning("python sandbox: isolation %s%s", explained,
                    "; falling back to a weaker mode" if fallback else "")
        self.last_error = why
        if self.mode is not None:
            self.complete = True  # a later start failed: serve with the servers there are
        if fallback:
            self.failed_modes[mode] = explained
        else:
            self.start_failures += 1
            if self.start_failures >= START_FAILURES_BEFORE_BACKOFF:
                self._give_up()

    def _give_up(self) -> None:
        """Starts keep failing: back off for a while, and fail the waiters unless a ready
        server will serve them."""
        self.backoff_until = time.monotonic() + BACKOFF_S
        self.start_failures = 0
        self.failed_modes.clear()
        if not self.ready():
            self.owner.cannot_start(f"the python sandbox cannot start: {self.last_error}")

    def _bury(self, proc: subprocess.Popen) -> None:
        self.corpses.append(proc)
        self.reactor.call_later(1.0, self.reap_corpses)

    def reap_corpses(self) -> None:
        self.corpses = [p for p in self.corpses if p.poll() is None]
        if self.corpses:
            self.reactor.call_later(1.0, self.reap_corpses)

    def shutdown(self) -> list[ForkServer]:
        """Mark every server dead and close its control socket (on which it kills every
        session and exits); returns them (their sessions are the owner's to settle first)."""
        servers, self.servers = self.servers, []
        return servers

    def close_server(self, z: ForkServer) -> None:
        z.move(F.DEAD)
        try:
            self.reactor.watch(z.ctrl, None)
        except (OSError, ValueError):
            pass
        z.ctrl.close()  # the fork server kills every session and exits on EOF
        z.errfile.close()
        self.corpses.append(z.proc)
