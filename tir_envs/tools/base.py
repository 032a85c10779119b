"""The tool contract: an async ``call`` on a per-episode session, returning a ``ToolResult``.

A tool never raises for anything the model did: bad arguments, crashing code, a failed query
all come back as a result with a status, so an episode always gets an observation.  Only
programming errors of the caller (wrong types passed by library code) raise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tir_envs.status import Status, ToolStatus

__all__ = ["NOT_YOUR_FAULT", "SandboxUnavailable", "Status", "Tool", "ToolResult", "ToolStatus",
           "describe_exception", "short_message"]

if TYPE_CHECKING:
    from tir_envs.task import Task

#: Appended to every infrastructure error the model reads: the failure was the host's.
NOT_YOUR_FAULT = "This is not your fault."
#: characters of an error message the model reads (one line; the rest is cut)
ERROR_CHARS = 300


def short_message(text: str, limit: int = ERROR_CHARS) -> str:
    """``text`` on one line and at most ``limit`` characters: how every tool's error reads
    (function, MCP and shipped tools alike), whatever the failure wrote."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit - 3].rstrip() + "..."


def describe_exception(exc: BaseException) -> str:
    """``Type: message`` of ``exc`` in one short line (exception groups unwrapped to their
    first member).  Never raises: a message that cannot become text is named as such."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    try:
        message = str(exc)
    except BaseException:  # noqa: BLE001 - a __str__ that fails is the exception's own fault
        message = "(its message could not be read)"
    name = type(exc).__name__
    return short_message(f"{name}: {message}" if message.strip() else name)


class SandboxUnavailable(RuntimeError):
    """A tool backend could not provide a session (pool shut down, host lost, cloud refused).

    Raised by backends and turned into an ``INFRA_ERROR`` result by the tool, never shown to
    the caller of ``step``.
    """


@dataclass
class ToolResult:
    """What a tool returns: the text the model will read, plus status, latency and details."""

    text: str
    status: Status = Status.OK
    latency_s: float = 0.0
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.status = Status.call(self.status)  # a call's word, never a turn's

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    @classmethod
    def error(cls, what: str, **metadata: Any) -> "ToolResult":
        """The call's own failure (``tool_error``): ``Error: <what>`` on one short line."""
        return cls(f"Error: {short_message(what)}", Status.ERROR, metadata=dict(metadata))

    @classmethod
    def infra(cls, what: str, **metadata: Any) -> "ToolResult":
        """An infrastructure failure as the model reads it: ``Error: <what>. This is not
        your fault.``  Only host-observed failures may use it (never a tool's own reply)."""
        return cls(f"Error: {what.rstrip('.')}. {NOT_YOUR_FAULT}", Status.INFRA_ERROR,
                   metadata=dict(metadata))


class Tool:
    """Base class for tools.  Stateless tools keep ``open_session`` returning ``None``.

    Stateful tools (a Python interpreter, a database connection) return a session object from
    ``open_session(task)``; the env opens it lazily on the first call of an episode and always
    closes it when the episode ends, also on errors.  Everything that differs per episode (the
    task's database, its working files) lives in the session: a tool object is never mutated
    per episode, so one tool serves many concurrent episodes.
    """

    name: str = "tool"

    async def open_session(self, task: "Task | None" = None) -> Any:
        return None

    async def call(self, arguments: dict[str, Any], session: Any = None) -> ToolResult:
        raise NotImplementedError(f"{type(self).__name__} must implement call()")

    async def close_session(self, session: Any) -> None:
        return None

    async def warm_up(self) -> None:
        """Load now what the first call would otherwise load (an index, a JVM), so that cost
        lands before the first episode instead of in its tool latency.  Idempotent."""
        return None

    def close(self) -> None:
        """Release process-wide resources (pools, connections).  Idempotent."""
