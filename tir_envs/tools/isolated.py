"""``isolation="process"`` for function tools: each call in a worker process killed at its
deadline.

In-process, a sync function past its deadline keeps running on its thread, and one holding the
GIL (a huge ``pow``, a regex that backtracks forever in C) slows every thread until it ends; no
thread can be stopped from outside.  A process can: ``Workers`` keeps up to
``max_concurrency`` worker processes per tool (started with ``spawn``, so no lock of this
process is inherited), sends each call to an idle one, and kills the worker whose call runs
past the deadline (the next call starts a fresh one).  The worker renders the result itself
(``tir_envs.tools.render``), so only text at most ``max_result_chars`` long crosses back.

What a worker may take from the host's episodes is bounded too, because a policy chooses the
arguments (``3 ** 12_000_000`` in a loop is a flood of calls killed at their deadline):

* workers are forked from a warm template (``multiprocessing``'s fork server, this module
  preloaded), not started as fresh interpreters: replacing a killed worker costs a fork and
  the import of the function's own module, not an interpreter's start on a loaded machine;
* workers run at a lower CPU priority (``WORKER_NICE``), so a call burning a core yields it to
  the host process (its loop, its other tools) whenever both want it;
* each call runs under a CPU-time limit (``RLIMIT_CPU``, its deadline plus a second): a worker
  whose host thread is gone (the host killed, a stuck pipe) still dies at the kernel's hand.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import os
import pickle
import threading
from typing import Any, Callable

from tir_envs.tools.base import ToolResult, describe_exception

#: seconds a worker process may take to start (the host's cost, never a call's)
START_TIMEOUT_S = 60.0
#: niceness added to every worker (0-19): a worker burning a core yields it to the host
WORKER_NICE = 10
#: what the fork server imports once, so a worker forked from it starts warm
PRELOAD = ["tir_envs.tools.isolated"]


def _context() -> Any:
    """The fork server where the platform has one (Linux, macOS), else ``spawn``: both start
    workers without inheriting this process's threads or locks."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


class Workers:
    """The worker processes of one function tool (see the module docstring)."""

    def __init__(self, fn: Callable[..., Any], name: str, size: int):
        try:
            pickle.dumps(fn)
        except Exception as exc:  # noqa: BLE001 - a lambda, a closure, a function in a test body
            raise TypeError(f"isolation='process' sends {name!r} to a worker process by name, "
                            f"but it cannot be pickled ({type(exc).__name__}); define it at the "
                            "top level of an importable module") from exc
        self.fn, self.name, self.size = fn, name, size
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._context = _context()

    async def warm_up(self) -> None:
        """Start one worker now, so the first call does not pay the interpreter's start."""
        with self._lock:
            if self._idle:
                return
        worker = await asyncio.get_running_loop().run_in_executor(None, self._start)
        self._put(worker)

    def _start(self) -> "_Worker":
        return _Worker(self._context, self.fn)

    def _take(self) -> "_Worker | None":
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.alive:
                    return worker
        return None

    def _put(self, worker: "_Worker") -> None:
        with self._lock:
            if len(self._idle) < self.size:
                self._idle.append(worker)
                return
        worker.kill()

    async def call(self, kwargs: dict[str, Any], left: float, limit: int,
                   release: Callable[[], None],
                   timed_out: Callable[[], ToolResult]) -> ToolResult:
        """Run one call within ``left`` seconds of a worker's time (starting a fresh worker
        is not counted); ``release`` frees the caller's slot once the worker is idle again or
        dead."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()

        def work() -> None:
            worker = None
            try:  # starting a worker is the host's cost: the call's time starts when it is up
                worker = self._take() or self._start()
                outcome = worker.run(kwargs, limit, self.name, left)
            except BaseException as exc:  # noqa: BLE001 - the worker could not be reached
                outcome = ToolResult.infra(f"the {self.name} worker process failed "
                                           f"({describe_exception(exc)})")
            if outcome is None:  # past the deadline: the worker dies with its call
                if worker is not None:
                    worker.kill()
            elif worker is not None and worker.alive:
                self._put(worker)
            release()
            try:
                loop.call_soon_threadsafe(_settle, future, outcome)
            except RuntimeError:
                pass

        threading.Thread(target=work, name=f"tool:{self.name}", daemon=True).start()
        outcome = await asyncio.shield(future)
        return timed_out() if outcome is None else outcome

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.kill()


class _Worker:
    """One worker process and the pipe to it."""

    def __init__(self, context: Any, fn: Callable[..., Any]):
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, fn), daemon=True,
                                       name="tir-envs-tool-worker")
        self.process.start()
        child.close()
        # up once it has imported the function's module: that start is not a call's time
        if not self.conn.poll(START_TIMEOUT_S) or self.conn.recv() != "ready":
            self.kill()
            raise RuntimeError(f"a worker process did not start within {START_TIMEOUT_S:g} s")

    @property
    def alive(self) -> bool:
        return self.process.is_alive()

    def run(self, kwargs: dict[str, Any], limit: int, name: str,
            left: float) -> ToolResult | None:
        """The call's result, or ``None`` when the worker did not answer within ``left``."""
        self.conn.send((kwargs, limit, name, left))
        if not self.conn.poll(left):
            return None
        try:
            return self.conn.recv()
        except EOFError:  # the worker died mid-call (os._exit, a crash in C)
            code = self.process.exitcode
            self.process.join(1)
            code = self.process.exitcode if code is None else code
            return ToolResult.error(f"{name}: the function ended its worker process "
                                    f"(exit code {code})", exited=True)

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self.conn.close()


def _settle(future: asyncio.Future, outcome: Any) -> None:
    if not future.done():
        future.set_result(outcome)


def _lower_priority() -> None:
    try:
        os.nice(WORKER_NICE)
    except (AttributeError, OSError):  # no nice() on this platform: the deadline still holds
        pass


def _limit_cpu(left: float) -> None:
    """This worker may use at most ``left`` more CPU seconds (plus one) before the kernel ends
    it (SIGXCPU), whatever happens to the host thread that would kill it at the deadline."""
    try:
        import resource
        used = resource.getrusage(resource.RUSAGE_SELF)
        spent = used.ru_utime + used.ru_stime
        soft = int(math.ceil(spent + left)) + 1
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    except (ImportError, ValueError, OSError):  # no rlimits here: the host's kill still holds
        pass


def _serve(conn: Any, fn: Callable[..., Any]) -> None:
    """The worker's loop: run each call sent, send back its result (never an exception)."""
    from tir_envs.tools.render import Unrenderable, cap, render

    _lower_priority()
    conn.send("ready")
    while True:
        try:
            kwargs, limit, name, left = conn.recv()
        except (EOFError, OSError):
            return
        _limit_cpu(left)
        try:
            value = fn(**kwargs)
            if asyncio.iscoroutine(value):
                value = asyncio.run(value)
            if isinstance(value, ToolResult):
                value.text = cap(value.text, limit)
                result = value
            else:
                result = ToolResult(cap(render(value, limit), limit))
        except Unrenderable as exc:
            result = ToolResult.error(f"{name}: {exc}", unrenderable=True)
        except BaseException as exc:  # noqa: BLE001 - SystemExit and all: the call's own
            result = ToolResult.error(f"{name}: {describe_exception(exc)}",
                                      exception=type(exc).__name__)
        try:
            conn.send(result)
        except Exception as exc:  # noqa: BLE001 - a result that cannot be pickled
            conn.send(ToolResult.error(f"{name}: its result cannot be sent back "
                                       f"({describe_exception(exc)})"))


__all__ = ["Workers"]
