"""``PythonTool``: the code tool of the math/code envs, on a pluggable sandbox backend."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import logging

from tir_envs.tools.base import SandboxUnavailable, Tool, ToolResult, Status
from tir_envs.tools.python.backends.base import SandboxBackend
from tir_envs.tools.python.backends.registry import make_backend
from tir_envs.tools.python.execution import Execution
from tir_envs.tools.python.limits import Limits

log = logging.getLogger("tir_envs.sandbox")
MAX_CODE_CHARS = 1_000_000
ERROR_STYLES = ("full", "last_line")


class PythonSession:
    """One episode's interpreter.  After the interpreter is lost (killed, timed out hard,
    infrastructure failure) the next call transparently gets a fresh one."""

    def __init__(self) -> None:
        self.handle: Any = None
        self.calls = 0
        self.restarts = 0
        self.closed = False

    def __repr__(self) -> str:
        return f"<PythonSession calls={self.calls} restarts={self.restarts} closed={self.closed}>"


class PythonTool(Tool):
    """Run Python code for the model, in one persistent sandboxed interpreter per episode.

    * ``backend``: ``"local"`` (default: the pre-forked local pool), ``"e2b"``, ``"ray"``, or a
      ``SandboxBackend`` object; ``backend_options`` go to the backend's constructor (e.g.
      ``isolation="bwrap"``, ``spares=16`` for local).
    * ``timeout_s`` (default 10 s), ``memory_mb`` (1024), ``max_output_chars`` (8192): the
      main limits; ``None`` keeps the value of ``limits`` (default ``Limits()``), which sets
      every limit at once (``Limits(memory_mb=None)`` lifts the memory limit).
    * ``stateful``: ``True`` keeps variables between the calls of an episode; ``False`` runs
      every call in a fresh interpreter, like the stateless executors of ToRL and ZeroTIR.
    * ``error_style``: ``"full"`` shows the traceback trimmed to the user's frames;
      ``"last_line"`` only its last line (``ZeroDivisionError: division by zero``), as ToRL.

    The text the model reads is: what the code printed, then the value of a final bare
    expression when it is not ``None`` (always, as a notebook shows ``Out[n]``), then stderr,
    then the error.
    """

    name = "python"

    def __init__(self, backend: str | SandboxBackend = "local", timeout_s: float | None = None,
                 memory_mb: int | None = None, max_output_chars: int | None = None,
                 stateful: bool = True, error_style: str = "full", *,
                 limits: Limits | None = None, **backend_options: Any):
        if error_style not in ERROR_STYLES:
            raise ValueError(f"error_style must be 'full' or 'last_line', got {error_style!r}")
        if not isinstance(stateful, bool):
            raise TypeError(f"stateful must be True or False, got {stateful!r}")
        if limits is not None and not isinstance(limits, Limits):
            raise TypeError(f"limits must be a tir_envs.tools.python.Limits, got {limits!r}")
        overrides = {"timeout_s": timeout_s, "memory_mb": memory_mb,
                     "max_output_chars": max_output_chars}
        self.limits = dataclasses.replace(limits or Limits(),
                                          **{k: v for k, v in overrides.items() if v is not None})
        self.stateful = stateful
        self.error_style = error_style
        self.backend = make_backend(backend, **backend_options)

    # ------------------------------------------------------------------ sessions
    async def open_session(self, task: Any = None) -> PythonSession:
        """A session; a stateful one claims its interpreter now (a warm spare, if any)."""
        session = PythonSession()
        if self.stateful:
            try:
                session.handle = await self.backend.open(self.limits)
            except SandboxUnavailable:
                session.handle = None  # the first call retries and reports infra_error
        return session

    async def close_session(self, session: Any) -> None:
        """End the session's interpreter and every process it started.  Never raises."""
        if not isinstance(session, PythonSession) or session.closed:
            return
        session.closed = True
        handle, session.handle = session.handle, None
        await self._close_quietly(handle)

    async def _close_quietly(self, handle: Any) -> None:
        if handle is None:
            return
        try:
            await self.backend.close(handle)
        except Exception:  # noqa: BLE001 - closing must never fail an episode
            pass

    # ------------------------------------------------------------------ calls
    async def call(self, arguments: dict[str, Any], session: Any = None) -> ToolResult:
        start = time.perf_counter()
        code = arguments.get("code") if isinstance(arguments, dict) else None
        if not isinstance(code, str):
            got = type(code).__name__ if isinstance(arguments, dict) else type(arguments).__name__
            exe = Execution.failure(Status.ERROR, "Error: the python tool needs an argument "
                                    f"'code' holding the program as a string (got {got}).")
        elif len(code) > MAX_CODE_CHARS:
            exe = Execution.failure(Status.ERROR, f"Error: the code is {len(code)} characters"
                                    f" long; the limit is {MAX_CODE_CHARS}.")
        else:
            try:
                if self.stateful and isinstance(session, PythonSession):
                    exe = await self._run_in(session, code)
                else:
                    exe = await self._run_once(code)
            except Exception as e:  # noqa: BLE001 - a backend bug is ours, never the caller's
                log.exception("python sandbox backend %s failed", self.backend.name)
                exe = Execution.infra(f"the Python sandbox backend failed ({type(e).__name__})")
                if isinstance(session, PythonSession) and session.handle is not None:
                    handle, session.handle = session.handle, None
                    await self._close_quietly(handle)
        exe = exe.bounded(self.limits.max_output_chars)
        meta = {**self.backend.describe(), **exe.metadata()}
        return ToolResult(exe.render(self.error_style), exe.status,
                          time.perf_counter() - start, meta)

    async def _open(self, stateless: bool = False) -> tuple[Any, Execution | None]:
        try:
            if stateless:  # one handle serves many one-shot calls (see SandboxBackend)
                return await self.backend.open(self.limits, stateless=True), None
            return await self.backend.open(self.limits), None
        except SandboxUnavailable as e:
            return None, Execution.infra(f"the Python sandbox is unavailable ({e})",
                                         lost_state=False)

    async def _run_in(self, session: PythonSession, code: str) -> Execution:
        if session.closed:
            return Execution.infra("this Python session was already closed", lost_state=False)
        if session.handle is None:
            session.handle, failure = await self._open()
            if failure is not None:
                return failure
            if session.calls:
                session.restarts += 1
        exe = await self.backend.run(session.handle, code, self.limits)
        session.calls += 1
        if exe.lost_state:
            handle, session.handle = session.handle, None
            await self._close_quietly(handle)
        return exe

    async def _run_once(self, code: str) -> Execution:
        handle, failure = await self._open(not self.stateful and self.backend.stateless_sessions)
        if failure is not None:
            return failure
        try:
            exe = await self.backend.run(handle, code, self.limits)
        finally:
            await self._close_quietly(handle)
        exe.lost_state = False  # nothing to lose: every call starts fresh
        return exe

    def close(self) -> None:
        """Release the backend's own resources (E2B clients, Ray handles).  The local pool is
        shared by the whole process and stays up; ``shutdown_pools()`` stops it (it also
        stops at exit)."""
        if self.backend.name != "local":
            self.backend.shutdown()
