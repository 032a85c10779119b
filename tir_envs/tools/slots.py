"""Bounded concurrency for one tool, shared by every event loop that calls it.

A tool object serves many episodes, and those episodes may run on different loops (a rollout
engine's, the sync bridge's per-thread loops).  ``Slots`` caps how many calls of the tool run
at once, so a tool whose calls hang can hold only its own slots, never the threads or the loop
that other tools and other episodes need.  A caller waits for a slot within its own deadline:
the waiting counts against the call's ``timeout_s``.  A slot is released when the work it
guards has really ended (a thread that finished, a worker process that was killed), not when
the caller gave up, so hung work can never pile up beyond the cap.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections import deque
from typing import Callable


class Slots:
    """At most ``size`` holders at once; ``acquire`` waits on the caller's loop."""

    def __init__(self, size: int):
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ValueError(f"max_concurrency must be an int >= 1, got {size!r}")
        self.size = size
        self._held = 0
        self._lock = threading.Lock()
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = deque()

    @property
    def held(self) -> int:
        return self._held

    async def acquire(self, timeout_s: float | None) -> bool:
        """Take a slot within ``timeout_s`` seconds; ``False`` when none came free in time."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._held < self.size and not self._waiters:
                self._held += 1
                return True
            future = loop.create_future()
            self._waiters.append((loop, future))
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout_s)
            return True
        except asyncio.TimeoutError:
            self._abandon(future)
            return False
        except BaseException:
            self._abandon(future)
            raise

    def _abandon(self, future: asyncio.Future) -> None:
        """A waiter gave up: drop it, or pass on a slot it was handed as it left."""
        with self._lock:
            handed = future.done() and not future.cancelled()
            if not handed:
                future.cancel()
                self._waiters = deque(w for w in self._waiters if w[1] is not future)
        if handed:
            self.release()

    def release(self) -> None:
        """Give a slot back (from any thread); the longest waiter gets it."""
        with self._lock:
            while self._waiters:
                loop, future = self._waiters.popleft()
                if future.done() or loop.is_closed():
                    continue
                loop.call_soon_threadsafe(self._hand, future)
                return
            self._held -= 1

    def _hand(self, future: asyncio.Future) -> None:
        if future.done():  # it gave up between being chosen and being handed the slot
            self.release()
        else:
            future.set_result(True)


class ThreadWorkers:
    """Daemon threads for one tool's sync calls, started on demand and reused: at most as many
    as its ``Slots`` allow run at once, so at most that many ever exist.  Daemon, so a call
    that never returns never blocks the interpreter's exit (``asyncio.to_thread``'s shared
    executor would: it is joined at exit, and one tool could fill it for every other)."""

    def __init__(self, name: str):
        self.name = name
        self._jobs: "queue.SimpleQueue[Callable[[], None]]" = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1
        self._jobs.put(job)
        if start:
            threading.Thread(target=self._run, name=f"tool:{self.name}", daemon=True).start()

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            job()
            with self._lock:
                self._idle += 1
