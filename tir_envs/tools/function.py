"""Tools from plain Python functions: ``function_tool(fn)`` and the ``@tool`` decorator.

A researcher with a new tool writes a function, not a ``Tool`` subclass::

    @tool(timeout_s=5)
    def lookup(city: str, unit: Literal["C", "F"] = "C") -> str:
        '''The temperature in a city.

        Args:
            city: the city's English name.
            unit: Celsius or Fahrenheit.
        '''

The schema the model reads comes from the hints and the docstring (``tir_envs.tools.schema``);
the model's arguments are checked against it before the function runs.  Async functions run
on the episode's event loop; blocking (sync) ones on a thread of their own, so one slow call
never stalls the other episodes.  Whatever the function does, ``call`` returns a result, and
nothing reaches the caller of ``step``:

* whatever the function raises -- any exception, ``SystemExit`` (an argparse error),
  ``KeyboardInterrupt`` raised by the code itself, a ``CancelledError`` of its own making, its
  own ``TimeoutError`` -- and a return value that cannot become text (an int past Python's
  int-to-text limit, a structure 5,000 deep) is an ``ERROR`` result, one short line: the
  turn's status is ``tool_error``, the policy's doing;
* only what the host saw is the host's: no answer within ``timeout_s`` is ``TIMEOUT``.

No tool can hold another episode: at most ``max_concurrency`` calls of one tool run at once
(a call waits for its turn within its own ``timeout_s``), and a slot is freed only when its
call has really ended, so calls that hang hold this tool's slots and nothing else.  Results
are measured before they are converted (``tir_envs.tools.render``).  What the in-process
default cannot stop is code that never yields: a sync function past its deadline keeps its
thread (its result is dropped), and one that holds the GIL (``3 ** 12_000_000``) slows every
thread of the process until it ends.  ``isolation="process"`` runs each call in a worker
process that is killed at the deadline (the function must be importable by name; per-episode
sessions stay in-process and are refused there).

Per-episode state: ``session=`` is a factory (sync or async, taking the episode's ``Task`` or
nothing) whose value is passed to the function's ``session`` parameter on every call of the
episode; the session is closed at the episode's end (its ``close``/``aclose`` or the
``close_session=`` callable), always.  The tool object itself never changes per episode.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import threading
import typing
from typing import Any, Awaitable, Callable

from tir_envs.tools.base import Tool, ToolResult, Status, describe_exception
from tir_envs.tools.render import Unrenderable, cap, render
from tir_envs.tools.schema import INJECTED, check_arguments, fn_name, function_schema
from tir_envs.tools.slots import Slots, ThreadWorkers
from tir_envs.validation import check_positive_number

#: characters of a function's result kept (head and tail), like every tool's cap
MAX_RESULT_CHARS = 16_000
#: calls of one function tool running at once, by default
MAX_CONCURRENCY = 4
ISOLATIONS = ("thread", "process")


class FunctionTool(Tool):
    """A ``Tool`` that calls a Python function (see the module docstring)."""

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None,
                 description: str | None = None, timeout_s: float = 30.0,
                 session: Callable[..., Any] | None = None,
                 close_session: Callable[[Any], Any] | None = None,
                 max_result_chars: int = MAX_RESULT_CHARS,
                 max_concurrency: int = MAX_CONCURRENCY, isolation: str = "thread"):
        if not callable(fn):
            raise TypeError(f"function_tool needs a callable, got {type(fn).__name__}")
        check_positive_number(unit="seconds", timeout_s=timeout_s)
        self.fn = fn
        self.schema = function_schema(fn, name, description)
        self.name = self.schema["function"]["name"]
        self.description = self.schema["function"]["description"]
        self.parameters = self.schema["function"]["parameters"]
        self.timeout_s = float(timeout_s)
        self.is_async = inspect.iscoroutinefunction(fn)
        params = inspect.signature(fn).parameters
        self.takes_session = "session" in params
        if session is not None and not self.takes_session:
            raise TypeError(f"{fn_name(fn)} gets a session factory but has no 'session' "
                            "parameter to receive it; add `session` to its parameters")
        self.session_factory = session
        self.close_hook = close_session
        self.max_result_chars = max_result_chars
        self.slots = Slots(max_concurrency)
        self._threads = ThreadWorkers(self.name)
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation={isolation!r}: choose from {ISOLATIONS}")
        self.isolation = isolation
        self._workers = None
        if isolation == "process":
            from tir_envs.tools.isolated import Workers
            if self.takes_session:
                raise TypeError(f"{fn_name(fn)} takes a session, which lives in this process; "
                                "isolation='process' runs calls elsewhere: drop the session "
                                "or use isolation='thread'")
            self._workers = Workers(fn, self.name, max_concurrency)
        hints = typing.get_type_hints(fn)
        self._enums = {k: h for k, h in hints.items()
                       if isinstance(h, type) and issubclass(h, enum.Enum)}
        self._optional = [p.name for p in params.values() if p.name not in INJECTED
                          and p.default is p.empty
                          and p.name not in self.parameters.get("required", [])]

    def __repr__(self) -> str:
        return f"FunctionTool({self.name!r}, timeout_s={self.timeout_s})"

    async def warm_up(self) -> None:
        if self._workers is not None:
            await self._workers.warm_up()

    def close(self) -> None:
        if self._workers is not None:
            self._workers.close()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The decorated function stays callable as written."""
        return self.fn(*args, **kwargs)

    # ------------------------------------------------------------------ sessions
    async def open_session(self, task: Any = None) -> Any:
        if self.session_factory is None:
            return None
        factory = self.session_factory
        wants_task = _arity(factory) > 0
        value = await _run(factory, (task,) if wants_task else (), self.timeout_s)
        return value

    async def close_session(self, session: Any) -> None:
        if session is None:
            return
        if self.close_hook is not None:
            await _run(self.close_hook, (session,), self.timeout_s)
            return
        for name in ("aclose", "close"):
            method = getattr(session, name, None)
            if callable(method):
                await _run(method, (), self.timeout_s)
                return

    # ------------------------------------------------------------------ calls
    async def call(self, arguments: dict[str, Any], session: Any = None) -> ToolResult:
        problem = check_arguments(arguments, self.parameters)
        if problem:
            return ToolResult(f"Error: {self.name}: {problem}", Status.ERROR,
                              metadata={"bad_arguments": True})
        kwargs = {**{k: None for k in self._optional}, **arguments}
        for key, kind in self._enums.items():
            if key in kwargs and kwargs[key] is not None:
                kwargs[key] = kind(kwargs[key])
        if self.takes_session:
            kwargs["session"] = session
        return await self._guarded(kwargs)

    async def _guarded(self, kwargs: dict[str, Any]) -> ToolResult:
        """The call within ``timeout_s``, the wait for a slot included."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        if not await self.slots.acquire(self.timeout_s):
            return ToolResult(f"Error: {self.name} timed out after {self.timeout_s:g} s "
                              f"(all {self.slots.size} of its slots stayed busy)",
                              Status.TIMEOUT, metadata={"waited_for_slot": True})
        left = max(0.0, deadline - loop.time())
        if self._workers is not None:
            return await self._workers.call(kwargs, left, self.max_result_chars,
                                            self.slots.release, self._timed_out)
        if self.is_async:
            return await self._on_loop(kwargs, left)
        return await self._in_thread(kwargs, left)

    def _timed_out(self) -> ToolResult:
        return ToolResult(f"Error: {self.name} timed out after {self.timeout_s:g} s",
                          Status.TIMEOUT)

    def _failed(self, exc: BaseException) -> ToolResult:
        """What the function raised, as the call's own one-line error."""
        if isinstance(exc, Unrenderable):
            return ToolResult.error(f"{self.name}: {exc}", unrenderable=True)
        return ToolResult.error(f"{self.name}: {describe_exception(exc)}",
                                exception=type(exc).__name__)

    def finish(self, value: Any) -> ToolResult:
        """The function's return value as the call's result (its text measured, then cut)."""
        if isinstance(value, ToolResult):  # the researcher's own host code chose the status
            value.text = cap(value.text, self.max_result_chars)
            return value
        try:
            return ToolResult(cap(render(value, self.max_result_chars),
                                  self.max_result_chars))
        except BaseException as exc:  # noqa: BLE001 - a value that cannot become text
            return self._failed(exc)

    async def _on_loop(self, kwargs: dict[str, Any], left: float) -> ToolResult:
        """An async function on this loop; everything it raises is its own error, except a
        cancellation of the caller and a Ctrl-C that may be the user's."""
        try:
            async with asyncio.timeout(left) as scope:
                value = await self.fn(**kwargs)
            return self.finish(value)
        except TimeoutError as exc:
            return self._timed_out() if scope.expired() else self._failed(exc)
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the caller's own cancellation (its deadline, a shutdown)
            return self._failed(exc)
        except KeyboardInterrupt as exc:
            if threading.current_thread() is threading.main_thread():
                raise  # on the main thread it may be the user's Ctrl-C
            return self._failed(exc)
        except BaseException as exc:  # noqa: BLE001 - SystemExit and the like: the tool's
            return self._failed(exc)
        finally:
            self.slots.release()

    async def _in_thread(self, kwargs: dict[str, Any], left: float) -> ToolResult:
        """A sync function on one of this tool's daemon threads (a call that never ends keeps
        its thread and its slot, and never blocks the interpreter's exit); its slot is freed
        when it ends."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()

        def work() -> None:
            try:
                value = self.fn(**kwargs)
                outcome: Any = value if inspect.isawaitable(value) else self.finish(value)
            except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt: its own
                outcome = self._failed(exc)
            finally:
                self.slots.release()
            try:
                loop.call_soon_threadsafe(_settle, future, outcome)
            except RuntimeError:  # the caller's loop is gone
                pass

        self._threads.submit(work)
        try:
            outcome = await asyncio.wait_for(asyncio.shield(future), left)
        except asyncio.TimeoutError:
            return self._timed_out()
        if inspect.isawaitable(outcome):  # a sync callable that returned an awaitable
            try:
                return self.finish(await asyncio.wait_for(_awaited(outcome), left))
            except asyncio.TimeoutError:
                return self._timed_out()
            except Exception as exc:  # noqa: BLE001 - its failure is the call's
                return self._failed(exc)
        return outcome


def _settle(future: asyncio.Future, outcome: Any) -> None:
    if not future.done():
        future.set_result(outcome)


async def _run(fn: Callable[..., Any], args: tuple, timeout_s: float,
               kwargs: dict[str, Any] | None = None) -> Any:
    """``fn(*args, **kwargs)`` within ``timeout_s``: coroutine functions on this loop, others
    on a worker thread (a thread past its deadline is abandoned: its result is dropped)."""
    kwargs = kwargs or {}
    if inspect.iscoroutinefunction(fn):
        return await asyncio.wait_for(fn(*args, **kwargs), timeout_s)
    result = await asyncio.wait_for(asyncio.to_thread(fn, *args, **kwargs), timeout_s)
    if inspect.isawaitable(result):  # a sync callable that returned an awaitable
        result = await asyncio.wait_for(_awaited(result), timeout_s)
    return result


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


def _arity(fn: Callable[..., Any]) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 0
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               and p.default is p.empty)


def function_tool(fn: Callable[..., Any] | None = None, **options: Any):
    """A ``FunctionTool`` for ``fn`` (options: ``name``, ``description``, ``timeout_s``,
    ``session``, ``close_session``, ``max_result_chars``, ``max_concurrency``,
    ``isolation``).  Without ``fn``: a decorator."""
    if fn is None:
        return lambda f: FunctionTool(f, **options)
    return FunctionTool(fn, **options)


#: ``@tool`` or ``@tool(timeout_s=5, session=...)``: the decorator form of ``function_tool``
tool = function_tool
