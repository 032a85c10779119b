"""Idle stateless templates, kept for the next one-shot call with the same limits.

A stateless session's interpreter is a *template*: it never runs code of the model, each
cell runs in a fresh fork of it (``sandbox/interpreter.fresh_cell``), so once its owner
closes it, it can serve the next stateless open with the same limits instead of a new
session being forked and set up.  The shelf keeps at most ``MAX_PARKED`` of them, each for
``PARKED_IDLE_S`` at most, and gives their slots back when the pool needs room.  Runs on the
reactor thread.
"""

from __future__ import annotations

import collections
import random
import time
from typing import Callable

from tir_envs.tools.python.pool.reactor import Reactor
from tir_envs.tools.python.pool.session import SessionHandle, SessionHost, SessionState

MAX_PARKED = 256         # idle stateless templates kept for later one-shot calls ...
PARKED_IDLE_S = 30.0     # ... each for this long at most


def take_one(handles: collections.deque, server: SessionHost | None,
             rand: random.Random) -> SessionHandle | None:
    """Remove and return one of ``server``'s ``handles`` (None: any of them) at random, or
    None.  The rest keep their order (parked templates expire oldest first)."""
    mine = [i for i, h in enumerate(handles) if server is None or h.fork_server is server]
    if not mine:
        return None
    i = rand.choice(mine)
    handle = handles[i]
    del handles[i]
    return handle


class TemplateShelf:
    """Parked templates by their limits key.  ``close`` ends a session for good;
    ``pool_closed`` says whether the pool shut down (nothing is parked then)."""

    def __init__(self, reactor: Reactor, close: Callable[[SessionHandle], None],
                 pool_closed: Callable[[], bool], rand: random.Random):
        self.reactor = reactor
        self._close = close
        self._pool_closed = pool_closed
        self._random = rand
        self._parked: dict[str, collections.deque[SessionHandle]] = {}
        self.count = 0
        self._expiry = None

    def park(self, handle: SessionHandle) -> bool:
        """Keep a closed stateless session for the next one-shot call with the same limits:
        after each cell it is back to its untouched state (see ``interpreter.fresh_cell``)."""
        if (not handle.fresh or handle.parked or handle.state is not SessionState.IDLE
                or handle.queue or handle.fork_server.state != "ready" or self._pool_closed()
                or self.count >= MAX_PARKED or not handle.key):
            return False
        handle.parked, handle.parked_at = True, time.monotonic()
        self._parked.setdefault(handle.key, collections.deque()).append(handle)
        self.count += 1
        if self._expiry is None:
            self._expiry = self.reactor.call_later(PARKED_IDLE_S / 2, self.expire)
        return True

    def expire(self, max_idle_s: float = PARKED_IDLE_S) -> None:
        """Close templates idle for longer than ``max_idle_s`` (their memory and slots)."""
        if self._expiry is not None:
            self._expiry.cancel()
        self._expiry = None
        oldest_allowed = time.monotonic() - max_idle_s
        for parked in self._parked.values():
            while parked and parked[0].parked_at <= oldest_allowed:
                handle = parked.popleft()
                handle.parked, handle.fresh = False, False
                self.count -= 1
                self._close(handle)
        if self.count and not self._pool_closed():
            self._expiry = self.reactor.call_later(PARKED_IDLE_S / 2, self.expire)

    def unpark(self, key: str, server: SessionHost | None) -> SessionHandle | None:
        """One of ``server``'s (None: any server's) templates parked with these limits, taken
        off the shelf, or None (templates found unusable on the way are closed)."""
        parked = self._parked.get(key, ())
        while True:
            handle = take_one(parked, server, self._random)
            if handle is None:
                return None
            handle.parked = False
            self.count -= 1
            if handle.state is SessionState.IDLE and handle.fork_server.state == "ready":
                return handle
            handle.fresh = False
            self._close(handle)

    def evict(self) -> SessionHandle:
        """The oldest template of some key, off the shelf (to give its slot back)."""
        key = next(k for k, q in self._parked.items() if q)
        handle = self._parked[key].popleft()
        handle.parked, handle.fresh = False, False
        self.count -= 1
        return handle

    def forget(self, handle: SessionHandle) -> None:
        """``handle`` died or its server retired: off the shelf."""
        if handle.parked:
            handle.parked = False
            self._parked[handle.key].remove(handle)
            self.count -= 1

    def close_of(self, server: SessionHost) -> None:
        """Close every template of ``server`` (it retired)."""
        for parked in list(self._parked.values()):
            for handle in [h for h in parked if h.fork_server is server]:
                self.forget(handle)
                handle.fresh = False
                self._close(handle)
