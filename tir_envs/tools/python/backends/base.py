"""What a Python sandbox backend provides to ``PythonTool`` (local pool, E2B, Ray).

A backend opens *handles* (one interpreter each), runs code in them and closes them.  It
reports everything the code did as an ``Execution``; it raises only ``SandboxUnavailable``
from ``open`` when no interpreter can be had (the tool turns that into ``infra_error``).
Restarting after a lost interpreter is the tool's job, so every backend behaves the same.
"""

from __future__ import annotations

import abc
from typing import Any

from tir_envs.tools.python.execution import Execution
from tir_envs.tools.python.limits import Limits
from tir_envs.tools.base import SandboxUnavailable

__all__ = ["SandboxBackend", "SandboxUnavailable"]


class SandboxBackend(abc.ABC):
    """Interface of a sandbox backend.  Implementations must be usable from any event loop."""

    name = "backend"

    #: Whether ``open(limits, stateless=True)`` gives a handle whose every ``run`` starts from
    #: a fresh interpreter (and leaves nothing behind), so one handle serves many one-shot
    #: calls.  Backends without it get a new handle per stateless call.
    stateless_sessions = False

    @abc.abstractmethod
    async def open(self, limits: Limits, stateless: bool = False) -> Any:
        """A new interpreter handle (raise ``SandboxUnavailable`` if none can be started);
        ``stateless`` only matters where ``stateless_sessions`` is true."""

    @abc.abstractmethod
    async def run(self, handle: Any, code: str, limits: Limits) -> Execution:
        """Run one cell; never raises for anything the code did."""

    @abc.abstractmethod
    async def close(self, handle: Any) -> None:
        """End the interpreter and everything it started; never raises."""

    def describe(self) -> dict:
        """What the backend is and guarantees (shown in result metadata and logs)."""
        return {"backend": self.name}

    def shutdown(self) -> None:
        """Release process-wide resources; idempotent."""
