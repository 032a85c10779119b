"""The default backend: the local pool of pre-forked, isolated interpreters
(``pool/sandbox_pool.py``)."""

from __future__ import annotations

import asyncio
from typing import Any

from tir_envs.status import Status
from tir_envs.tools.python.backends.base import SandboxBackend
from tir_envs.tools.python.execution import Execution
from tir_envs.tools.python.limits import Limits
from tir_envs.tools.python.pool.sandbox_pool import PoolConfig, SandboxPool, SessionHandle, get_pool
from tir_envs.tools.python.pool.reactor import awaitable
from tir_envs.tools.python.sandbox import protocol
from tir_envs.tools.python.sandbox.protocol import Op

_SIGNALS = {9: "SIGKILL", 6: "SIGABRT", 11: "SIGSEGV", 7: "SIGBUS", 15: "SIGTERM",
            24: "SIGXCPU", 25: "SIGXFSZ", 8: "SIGFPE", 4: "SIGILL", 2: "SIGINT"}


def timeout_message(timeout_s: float) -> str:
    return f"TimeoutError: the code ran longer than the {timeout_s:g} s time limit and was stopped."


def _death_message(reply: dict) -> str:
    sig, code = reply.get("signal"), reply.get("code")
    if reply.get("between_calls"):
        return f"{_death_message({**reply, 'between_calls': False})[:-1]}, after the previous call."
    if sig:
        name = _SIGNALS.get(sig, f"signal {sig}")
        why = {"SIGKILL": " (a resource limit, or the code killed itself)",
               "SIGXCPU": " (the CPU time limit)", "SIGSEGV": " (a crash in native code)"}
        return f"Killed: the interpreter was terminated by {name}{why.get(name, '')}."
    if code is not None:
        return f"Killed: the interpreter process exited with code {code}."
    return "Killed: the interpreter process died."


def execution_from_reply(reply: dict, limits: Limits) -> Execution:
    """Turn a pool reply into an Execution: the interpreter's result (validated by the pool,
    its status one an interpreter may claim), or one the pool made up from what it observed.
    The reply's ``status`` is already a word of ``Status``: nothing is renamed here."""
    status = Status.call(reply["status"])
    details = {k: reply[k] for k in ("cpu_s", "signal", "code") if reply.get(k) is not None}
    details["exit"] = reply.get("limit") or reply.get("cause") or status.value
    if reply.get("op") == Op.RESULT and status.value in protocol.STATUSES:
        return _interpreter_result(status, reply, limits, details)
    if status is Status.TIMEOUT or (status is Status.KILLED and reply.get("timed_out")):
        return Execution.failure(Status.TIMEOUT, timeout_message(limits.timeout_s),
                                 lost_state=True, **(details if reply.get("timed_out") else {}))
    if status is Status.KILLED:
        cause = reply.get("cause")
        if cause == "flood":
            return Execution.failure(status, "Killed: the code flooded the sandbox's host "
                                     f"({reply.get('error')}).", lost_state=True)
        if cause == "protocol":
            return Execution.failure(status, "Killed: the interpreter sent a malformed reply "
                                     "(the code tampered with the sandbox).", lost_state=True)
        return Execution.failure(status, _death_message(reply), lost_state=True, **details)
    return Execution.infra(f"the Python sandbox failed ({reply.get('error')})", exit="infra")


def _interpreter_result(status: Status, reply: dict, limits: Limits,
                        details: dict) -> Execution:
    exe = Execution(status, stdout=reply.get("stdout") or "",
                    stderr=reply.get("stderr") or "", value=reply.get("value"),
                    error=reply.get("error"), error_last_line=reply.get("error_last_line"),
                    truncated=bool(reply.get("truncated")),
                    duration_s=float(reply.get("duration_s") or 0.0), details=details)
    if status is Status.TIMEOUT:
        message = timeout_message(limits.timeout_s)
        trace = (exe.error or "").rsplit("\n", 1)[0] if exe.error else ""
        exe.error = f"{trace}\n{message}" if trace.startswith("Traceback") else message
        exe.error_last_line = message
    return exe


class LocalBackend(SandboxBackend):
    """Sessions from the process-wide local pool for these settings (see ``PoolConfig``).

    Every ``LocalBackend`` with equal settings shares one pool, so many envs (and threads,
    and event loops) share its fork servers and one set of warm spares.  ``pool_options``:
    the other ``PoolConfig`` fields, e.g. ``fork_servers`` and ``sessions_per_fork_server``.
    """

    name = "local"
    stateless_sessions = True

    def __init__(self, isolation: str = "auto", spares: int | None = None,
                 max_sessions: int | None = None, preload: tuple[str, ...] | None = None,
                 disk_mb: int = 64, interrupt_grace_s: float = 1.0, **pool_options: Any):
        kwargs = dict(isolation=isolation, spares=spares, max_sessions=max_sessions,
                      disk_mb=disk_mb, interrupt_grace_s=interrupt_grace_s, **pool_options)
        if preload is not None:
            kwargs["preload"] = tuple(preload)
        self.config = PoolConfig(**kwargs)

    @property
    def pool(self) -> SandboxPool:
        return get_pool(self.config)

    async def open(self, limits: Limits, stateless: bool = False) -> SessionHandle:
        return await awaitable(self.pool.open_session(
            fresh=stateless, limits=limits.process_limits() if stateless else None))

    async def run(self, handle: SessionHandle, code: str, limits: Limits) -> Execution:
        fut = self.pool.run(handle, code, limits.process_limits(), limits.timeout_s,
                            limits.max_output_chars)
        try:
            reply = await awaitable(fut)
        except asyncio.CancelledError:
            self.pool.abandon(handle, fut)
            raise
        exe = execution_from_reply(reply, limits)
        exe.details["isolation"] = handle.fork_server.mode
        return exe

    async def close(self, handle: SessionHandle) -> None:
        await awaitable(self.pool.close_session(handle))

    def describe(self) -> dict:
        return {"backend": self.name, "isolation": self.config.isolation}

    def shutdown(self) -> None:
        """Stop this configuration's pool (other configurations keep theirs)."""
        self.pool.shutdown()
