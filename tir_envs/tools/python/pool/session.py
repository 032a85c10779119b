"""A pooled session's life: its state machine, its handle and the call it is running.

The states are an enum and every change goes through ``SessionHandle.move``, which refuses a
transition the table below does not list (a bug in the pool, never something a session can
cause): the pool's many callbacks (frames, timers, the fork server's reports, the caller's
close) cannot drive a session into a state nobody reasoned about.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import enum
import socket
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from tir_envs.tools.python.sandbox import protocol

if TYPE_CHECKING:  # pragma: no cover
    from tir_envs.tools.python.isolation.cgroups import SessionCgroup

MAX_HELLO = 64 * 1024    # the session's JSON hello (and setup error)


class SessionState(str, enum.Enum):
    """Where a session is in its life (a ``str``, so it compares and prints as its name)."""

    SPAWNING = "spawning"          # forked, its hello not read yet
    READY = "ready"                # said hello: a spare, owned by the pool
    IDLE = "idle"                  # handed to an episode (or a parked stateless template)
    CONFIGURING = "configuring"    # its setup request sent, ``setup_ok`` not read yet
    RUNNING = "running"            # a cell sent, its result not taken yet
    INTERRUPTING = "interrupting"  # past its deadline: SIGINT sent, a grace period runs
    DEAD = "dead"                  # can run no more cells (its owner has not closed it yet)
    CLOSING = "closing"            # closed by its owner, its exit not confirmed yet
    CLOSED = "closed"              # closed and gone (or given up on after a bound)

    def __str__(self) -> str:
        return self.value


S = SessionState
_ENDINGS = {S.DEAD, S.CLOSING, S.CLOSED}
TRANSITIONS: dict[SessionState, frozenset[SessionState]] = {
    S.SPAWNING: frozenset({S.READY, *_ENDINGS}),
    S.READY: frozenset({S.IDLE, *_ENDINGS}),
    S.IDLE: frozenset({S.CONFIGURING, S.RUNNING, *_ENDINGS}),
    S.CONFIGURING: frozenset({S.IDLE, *_ENDINGS}),
    S.RUNNING: frozenset({S.INTERRUPTING, S.IDLE, *_ENDINGS}),
    S.INTERRUPTING: frozenset({S.IDLE, *_ENDINGS}),
    S.DEAD: frozenset({S.CLOSING, S.CLOSED}),
    S.CLOSING: frozenset({S.CLOSING, S.CLOSED}),   # a second close joins the first
    S.CLOSED: frozenset({S.CLOSED}),
}
ALIVE = frozenset({S.READY, S.IDLE, S.RUNNING, S.INTERRUPTING})
BUSY = frozenset({S.RUNNING, S.INTERRUPTING, S.CONFIGURING})   # a new call queues behind
ENDED = frozenset(_ENDINGS)


class SessionStateError(RuntimeError):
    """A transition the state table does not allow: a bug in the pool."""


@dataclass
class PendingCall:
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
    frames: int = 0             # what the session sent the host during this call ...
    bytes_in: int = 0
    host_cpu_s: float = 0.0     # ... and the reactor's CPU it cost (see calls.CallBudget)
    over_budget: str | None = None  # why the host stopped reading it (ends at its deadline)


class SessionHost(Protocol):
    """What a session knows of the fork server that forked it: its state (``"ready"`` while
    it forks).  The server (``fork_servers.ForkServer``) holds its sessions and imports this
    module; a session only points back, so this module never imports the server's."""

    state: Any


class SessionHandle:
    """One interpreter owned by one episode.  Opaque: pass it back to the pool."""

    def __init__(self, sid: int, fork_server: SessionHost, sock: socket.socket):
        self.sid = sid
        self.fork_server = fork_server
        self.sock: socket.socket | None = sock
        self.decoder = protocol.Decoder(MAX_HELLO)
        self._state = SessionState.SPAWNING
        self.out = bytearray()
        self.run: PendingCall | None = None
        self.queue: collections.deque = collections.deque()
        self.exit: dict | None = None
        self.close_futures: list[cf.Future] = []
        self.dead_reason: str | None = None
        self.configured = False
        self.info: dict = {}
        self.timer = None
        self.dying_run: PendingCall | None = None  # the run during which the process died
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
    def state(self) -> SessionState:
        return self._state

    def move(self, new: SessionState) -> None:
        """Change state, refusing any transition ``TRANSITIONS`` does not list."""
        if new not in TRANSITIONS[self._state]:
            raise SessionStateError(f"session {self.sid}: {self._state} -> {new} is not a "
                                    f"transition of the session state machine")
        self._state = new

    @property
    def alive(self) -> bool:
        return self._state in ALIVE

    def __repr__(self) -> str:
        return f"<SessionHandle sid={self.sid} state={self._state}>"
