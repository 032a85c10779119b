"""One background thread that drives every sandbox socket and timer of the process.

Why a thread and not asyncio: the pool is shared by environments that run their coroutines on
*different* event loops (``TIREnv.step`` uses a private loop per env, ``astep`` the caller's)
and by plain threads.  Asyncio objects belong to one loop, so the pool keeps none: the reactor
owns the sockets, and callers get ``concurrent.futures.Future`` objects, which any loop can
await (``awaitable``: ``asyncio.wrap_future`` with one wake-up of the loop per batch of
completions) and any thread can block on with ``.result()``.

All pool state is touched only on the reactor thread (``call_soon`` hands work to it), so the
pool needs no locks.  A callback that raises is logged and the loop goes on.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures as cf
import heapq
import itertools
import logging
import os
import selectors
import socket
import threading
import time
import weakref
from typing import Any, Callable

log = logging.getLogger("tir_envs.sandbox")


class Timer:
    """A pending ``call_later``; ``cancel()`` is idempotent."""

    __slots__ = ("when", "fn", "args", "cancelled")

    def __init__(self, when: float, fn: Callable, args: tuple):
        self.when, self.fn, self.args, self.cancelled = when, fn, args, False

    def cancel(self) -> None:
        self.cancelled = True
        self.fn, self.args = None, ()  # drop references now; the heap entry goes later


class Reactor:
    """A selector loop on a daemon thread, with thread-safe ``call_soon``."""

    def __init__(self) -> None:
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._lock = threading.Lock()
        self._pending: collections.deque = collections.deque()
        self._timers: list = []
        self._compact_at = 1024
        self._seq = itertools.count()
        self._woken = False
        self._closed = False
        self._handlers: dict[int, list] = {}
        self._thread = threading.Thread(target=self._loop, name="tir-sandbox-reactor",
                                        daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ any thread
    def call_soon(self, fn: Callable, *args: Any) -> None:
        with self._lock:
            self._pending.append((fn, args))
            wake = not self._woken
            self._woken = True
        if wake:
            try:
                self._wake_w.send(b"\0")
            except OSError:
                pass

    def in_thread(self) -> bool:
        return threading.get_ident() == self._thread.ident

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the loop; sockets it watched are left to their owners."""
        self._closed = True
        self.call_soon(lambda: None)
        if not self.in_thread():
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self._closed

    # ------------------------------------------------------------------ reactor thread
    def call_later(self, delay: float, fn: Callable, *args: Any) -> Timer:
        timer = Timer(time.monotonic() + delay, fn, args)
        heapq.heappush(self._timers, (timer.when, next(self._seq), timer))
        if len(self._timers) >= self._compact_at:  # most long timers end up cancelled
            self._timers = [t for t in self._timers if not t[2].cancelled]
            heapq.heapify(self._timers)
            self._compact_at = max(1024, 2 * len(self._timers))
        return timer

    def watch(self, sock, reader: Callable | None, writer: Callable | None = None) -> None:
        """Set (or replace) the read/write callbacks of ``sock``; both None: stop watching."""
        fd = sock.fileno()
        events = (selectors.EVENT_READ if reader else 0) | (selectors.EVENT_WRITE if writer else 0)
        known = fd in self._handlers
        if not events:
            if known:
                del self._handlers[fd]
                try:
                    self._sel.unregister(fd)
                except (KeyError, ValueError, OSError):
                    pass
            return
        self._handlers[fd] = [reader, writer]
        if known:
            self._sel.modify(fd, events)
        else:
            self._sel.register(fd, events)

    def _loop(self) -> None:
        while not self._closed:
            timeout = None
            if self._timers:
                timeout = max(0.0, self._timers[0][0] - time.monotonic())
            try:
                events = self._sel.select(timeout)
            except OSError as exc:  # a watched fd closed under us: drop stale handlers
                log.debug("select failed: %s", exc)
                self._drop_closed()
                continue
            for key, mask in events:
                if key.fileobj is self._wake_r:
                    self._drain_wake()
                    continue
                handlers = self._handlers.get(key.fd)
                if handlers is None:
                    continue
                if mask & selectors.EVENT_READ and handlers[0]:
                    self._safe(handlers[0])
                if mask & selectors.EVENT_WRITE and handlers[1]:
                    self._safe(handlers[1])
            self._run_pending()
            self._run_timers()

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _run_pending(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, collections.deque()
            self._woken = False
        for fn, args in batch:
            self._safe(fn, *args)

    def _run_timers(self) -> None:
        now = time.monotonic()
        while self._timers and self._timers[0][0] <= now:
            _, _, timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                self._safe(timer.fn, *timer.args)

    def _drop_closed(self) -> None:
        for fd in list(self._handlers):
            try:
                os.fstat(fd)
            except OSError:
                self._handlers.pop(fd, None)
                try:
                    self._sel.unregister(fd)
                except (KeyError, ValueError, OSError):
                    pass

    @staticmethod
    def _safe(fn: Callable, *args: Any) -> None:
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - one failing callback must not stop the reactor
            log.exception("sandbox reactor callback %r failed", fn)


class _LoopWaker:
    """Hands the reactor's completed futures to one event loop in batches: one
    ``call_soon_threadsafe`` (a write to the loop's self-pipe) for all the futures completed
    since the loop last ran, where ``asyncio.wrap_future`` writes once per future (a tenth of
    the reactor thread's time at 64 busy sessions)."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self._lock = threading.Lock()
        self._done: list = []

    def add(self, waiter: asyncio.Future, fut: cf.Future) -> None:
        with self._lock:
            first = not self._done
            self._done.append((waiter, fut))
        if first:
            try:
                self._loop.call_soon_threadsafe(self._flush)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass

    def _flush(self) -> None:
        with self._lock:
            batch, self._done = self._done, []
        for waiter, fut in batch:
            if waiter.done():
                continue
            if fut.cancelled():
                waiter.cancel()
            elif (exc := fut.exception()) is not None:
                waiter.set_exception(exc)
            else:
                waiter.set_result(fut.result())


_WAKERS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopWaker]" = (
    weakref.WeakKeyDictionary())
_WAKERS_LOCK = threading.Lock()


def awaitable(fut: cf.Future) -> asyncio.Future:
    """``fut`` (completed by the reactor thread) as an asyncio future of the running loop;
    cancelling that cancels ``fut`` too, as with ``asyncio.wrap_future``."""
    loop = asyncio.get_running_loop()
    with _WAKERS_LOCK:
        waker = _WAKERS.get(loop)
        if waker is None:
            waker = _WAKERS[loop] = _LoopWaker(loop)
    waiter = loop.create_future()
    waiter.add_done_callback(lambda w: fut.cancel() if w.cancelled() else None)
    fut.add_done_callback(lambda f: waker.add(waiter, f))
    return waiter


_REACTOR: Reactor | None = None
_REACTOR_LOCK = threading.Lock()


def get_reactor() -> Reactor:
    """The process-wide reactor, started on first use (and again in a forked child)."""
    global _REACTOR
    with _REACTOR_LOCK:
        if _REACTOR is None or not _REACTOR.alive:
            _REACTOR = Reactor()
        return _REACTOR


def _forget_after_fork() -> None:
    global _REACTOR, _REACTOR_LOCK
    _REACTOR = None
    _REACTOR_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
