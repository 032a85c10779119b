"""Run the env's async implementation from sync code (Gymnasium's ``reset``/``step``/``close``).

``TIREnv`` is async-first: ``areset``/``astep``/``aclose`` are the only implementation, and the
sync methods run them with ``run_sync``.  Most steps do no I/O at all (a thinking turn: append
the ids, decode, parse, check budgets), and an event loop round trip would cost more than the
step itself.  So the coroutine first runs right here, without a loop; code that is about to
do I/O (run a tool, close a session) first awaits ``needs_loop()``, which
hands the rest of the coroutine over to an event loop: this thread's own (one per thread,
shared by every env on it), or, when the caller is itself inside a running loop (a notebook),
a fresh loop on a helper thread.  Inside a running loop ``needs_loop()`` costs nothing.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import threading
import weakref
from typing import Any, Coroutine, Generator

_HANDOVER = object()  # what a loop-less coroutine yields to ask for a loop
_LOCAL = threading.local()


class _NeedsLoop:
    def __await__(self) -> Generator[Any, None, None]:
        yield _HANDOVER


def in_loop() -> bool:
    """Whether this code runs on an event loop (``False``: driven loop-less by ``run_sync``,
    with nothing else to interleave, so blocking work may run inline)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def needs_loop() -> None:
    """Await before the first I/O of code that ``run_sync`` may drive (see the module)."""
    if not in_loop():
        await _NeedsLoop()


def run_sync(coro: Coroutine[Any, Any, Any]) -> Any:
    """The result of ``coro``, from sync code (see the module docstring)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:  # inside someone's running loop: the whole coroutine on a helper thread's loop
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, coro).result()
    try:
        yielded = coro.send(None)
    except StopIteration as done:
        return done.value
    except RuntimeError as exc:
        if "no running event loop" in str(exc):
            raise RuntimeError("an env coroutine did I/O without `await needs_loop()` first "
                               "(tir_envs.sync_bridge), so it cannot run from sync code") from exc
        raise
    if yielded is not _HANDOVER:
        coro.close()
        raise RuntimeError("an env coroutine awaited I/O without `await needs_loop()` first; "
                           "it cannot run without an event loop")
    return _thread_loop().run_until_complete(_resume(coro))


async def _resume(coro: Coroutine[Any, Any, Any]) -> Any:
    """Continue ``coro`` (paused at its handover) as part of this task."""
    return await _Resumed(coro)


class _Resumed:
    """An awaitable that drives an already started coroutine to its end."""

    def __init__(self, coro: Coroutine[Any, Any, Any]):
        self.coro = coro

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, send, error = self.coro, None, None
        while True:
            try:
                yielded = coro.throw(error) if error is not None else coro.send(send)
            except StopIteration as done:
                return done.value
            send, error = None, None
            try:
                send = yield yielded
            except BaseException as exc:  # noqa: BLE001 - cancellation goes into the coroutine
                error = exc


def _thread_loop() -> asyncio.AbstractEventLoop:
    """One event loop per thread for sync calls, shared by every env on it, so creating many
    envs does not create (and leak) many loops."""
    loop = getattr(_LOCAL, "loop", None)
    if loop is None or loop.is_closed():
        loop = _LOCAL.loop = asyncio.new_event_loop()
        _THREAD_LOOPS.add(loop)
    return loop


#: every thread's sync loop (weakly: a finished thread's loop is not kept alive)
_THREAD_LOOPS: "weakref.WeakSet[asyncio.AbstractEventLoop]" = weakref.WeakSet()


@atexit.register
def _close_thread_loops() -> None:
    """Close the sync loops at exit (else: 'unclosed event loop' ResourceWarnings)."""
    for loop in list(_THREAD_LOOPS):
        if not loop.is_running() and not loop.is_closed():
            loop.close()
