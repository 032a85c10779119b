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
on the episode's event loop; blocking (sync) ones on a worker thread, so one slow call never
stalls the other episodes.  Whatever the function does, ``call`` returns a result: a raised
exception is an ``ERROR`` result (the turn's status is ``tool_error``), a call past
``timeout_s`` is a ``TIMEOUT`` result.  Nothing reaches the caller of ``step``.

Per-episode state: ``session=`` is a factory (sync or async, taking the episode's ``Task`` or
nothing) whose value is passed to the function's ``session`` parameter on every call of the
episode; the session is closed at the episode's end (its ``close``/``aclose`` or the
``close_session=`` callable), always.  The tool object itself never changes per episode.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import json
import typing
from typing import Any, Awaitable, Callable

from tir_envs.tools.base import Tool, ToolResult, Status
from tir_envs.tools.schema import INJECTED, check_arguments, fn_name, function_schema
from tir_envs.validation import check_positive_number

#: characters of a function's result kept (head and tail), like every tool's cap
MAX_RESULT_CHARS = 16_000


class FunctionTool(Tool):
    """A ``Tool`` that calls a Python function (see the module docstring)."""

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None,
                 description: str | None = None, timeout_s: float = 30.0,
                 session: Callable[..., Any] | None = None,
                 close_session: Callable[[Any], Any] | None = None,
                 max_result_chars: int = MAX_RESULT_CHARS):
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
        hints = typing.get_type_hints(fn)
        self._enums = {k: h for k, h in hints.items()
                       if isinstance(h, type) and issubclass(h, enum.Enum)}
        self._optional = [p.name for p in params.values() if p.name not in INJECTED
                          and p.default is p.empty
                          and p.name not in self.parameters.get("required", [])]

    def __repr__(self) -> str:
        return f"FunctionTool({self.name!r}, timeout_s={self.timeout_s})"

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
        try:
            value = await _run(self.fn, (), self.timeout_s, kwargs)
        except asyncio.TimeoutError:
            return ToolResult(f"Error: {self.name} timed out after {self.timeout_s:g} s",
                              Status.TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - the function's failure is the call's result
            return ToolResult(f"Error: {type(exc).__name__}: {exc}", Status.ERROR,
                              metadata={"exception": type(exc).__name__})
        if isinstance(value, ToolResult):  # the researcher's own host code chose the status
            value.text = cap(value.text, self.max_result_chars)
            return value
        return ToolResult(cap(render_value(value), self.max_result_chars))


def render_value(value: Any) -> str:
    """The text the model reads for a function's return value."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def cap(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, head and tail kept."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n...[{len(text) - 2 * half} characters cut]...\n{text[-half:]}"


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
    ``session``, ``close_session``, ``max_result_chars``).  Without ``fn``: a decorator."""
    if fn is None:
        return lambda f: FunctionTool(f, **options)
    return FunctionTool(fn, **options)


#: ``@tool`` or ``@tool(timeout_s=5, session=...)``: the decorator form of ``function_tool``
tool = function_tool
