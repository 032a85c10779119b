"""One event loop on its own thread, owning a long-lived connection (an MCP client, an OpenEnv
websocket) that many envs on other loops share.

A connection made by ``anyio``/``asyncio`` belongs to the loop that opened it, but the envs
that use it run on other loops (a rollout engine's, the sync bridge's per-thread loop, a test's
``asyncio.run``).  So the connection lives here, and callers submit coroutines with ``submit``:
the result comes back to the caller's loop, and a caller's deadline cancels the work here.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import threading
import weakref
from typing import Any, Coroutine

_LIVE: "weakref.WeakSet[LoopThread]" = weakref.WeakSet()


class LoopThread:
    """A daemon thread running an event loop until ``stop``."""

    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        _LIVE.add(self)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float | None = None) -> Any:
        """``coro``'s result, from sync code on another thread (raises ``TimeoutError``)."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer within {timeout} s") from None

    async def submit(self, coro: Coroutine[Any, Any, Any], timeout: float | None = None) -> Any:
        """``coro``'s result on the caller's loop; past ``timeout`` (or when the caller is
        cancelled) the work here is cancelled too and ``asyncio.TimeoutError`` is raised."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        wrapped = asyncio.wrap_future(future)
        try:
            return await asyncio.wait_for(wrapped, timeout)
        except BaseException:
            future.cancel()
            raise

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self.loop.is_closed()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop and join the thread (idempotent)."""
        if self.loop.is_closed():
            return
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()


@atexit.register
def _stop_all() -> None:
    for thread in list(_LIVE):
        thread.stop(1.0)
