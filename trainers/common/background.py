"""An asyncio loop on a daemon thread, for trainers that call from synchronous code.

A gateway's HTTP server must outlive each rollout (clients keep one address), while the
trainers call their rollout hooks synchronously (the bundled GRPO step, TRL's
``rollout_func``): the server lives on this loop for the whole run and each rollout blocks on
it until its episodes are finished.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Awaitable, TypeVar

T = TypeVar("T")


class BackgroundLoop:
    """An asyncio loop on a daemon thread; ``run(coro)`` waits for a result from any thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="gateway-loop",
                                       daemon=True)
        self.thread.start()

    def run(self, coro: Awaitable[T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)
        if not self.loop.is_running():
            self.loop.close()
