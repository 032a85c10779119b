"""The E2B backend: each session is one E2B sandbox (a Firecracker microVM running a Jupyter
kernel), through the official ``e2b-code-interpreter`` SDK (``pip install 'tir-envs[e2b]'``).

The SDK's *synchronous* client is driven from a private thread pool, so the backend works from
any event loop and thread, like the local one.  Connection settings come from the arguments or
the SDK's environment variables: ``E2B_API_KEY``, ``E2B_DOMAIN`` (self-hosted E2B) and
``E2B_API_URL``.  What E2B reports maps onto the same statuses as the local sandbox:
a Python exception is ``error`` (``MemoryError``: ``killed``), the execution timeout is
``timeout`` (the sandbox is then discarded: E2B keeps running the cell), and anything the
service itself does wrong (auth, network, a dead sandbox) is ``infra_error``, never a silent
empty result.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import functools
import os
import re
from typing import Any

from tir_envs.tools.base import Status
from tir_envs.tools.python.backends.base import SandboxBackend, SandboxUnavailable
from tir_envs.tools.python.execution import Execution
from tir_envs.tools.python.limits import Limits
from tir_envs.tools.python.sandbox.capture import sanitize, truncate_text
from tir_envs.validation import check_positive_int

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """Jupyter tracebacks are colored; the model reads plain text."""
    return _ANSI.sub("", text)


def _load_sdk():
    try:
        from e2b_code_interpreter import Sandbox
    except ImportError as exc:
        raise ImportError("the e2b backend needs the E2B SDK: pip install 'tir-envs[e2b]' "
                          "(e2b-code-interpreter)") from exc
    return Sandbox


def _cap(text: str, limit: int) -> tuple[str, bool]:
    out, dropped = truncate_text(sanitize(text), limit)
    return out, bool(dropped)


def execution_from_e2b(ex: Any, limits: Limits) -> Execution:
    """An SDK ``Execution`` (results, logs, error) as our ``Execution``."""
    limit = limits.max_output_chars
    stdout, cut_out = _cap("".join(ex.logs.stdout), limit)
    stderr, cut_err = _cap("".join(ex.logs.stderr), limit)
    main = next((r for r in ex.results if getattr(r, "is_main_result", False)), None)
    value, cut_val = (None, False)
    if main is not None and main.text is not None:
        value, cut_val = _cap(main.text, limit)
    exe = Execution(Status.OK, stdout=stdout, stderr=stderr, value=value,
                    truncated=cut_out or cut_err or cut_val,
                    details={"execution_count": getattr(ex, "execution_count", None)})
    if ex.error is not None:
        last = f"{ex.error.name}: {ex.error.value}" if ex.error.value else ex.error.name
        full = strip_ansi(ex.error.traceback or "").rstrip("\n") or last
        exe.error, cut_tb = _cap(full, limit)
        exe.error_last_line = sanitize(last)
        exe.truncated = exe.truncated or cut_tb
        exe.status = Status.KILLED if ex.error.name == "MemoryError" else Status.ERROR
        exe.value = None
    return exe


class E2BBackend(SandboxBackend):
    """One E2B sandbox per session.

    ``api_key``/``domain``/``api_url`` default to ``E2B_API_KEY``/``E2B_DOMAIN``/``E2B_API_URL``;
    ``template``: the sandbox template (default: the SDK's code-interpreter template);
    ``sandbox_timeout_s``: how long E2B keeps an idle sandbox alive; ``max_workers``: threads
    driving the blocking SDK (the most calls in flight at once); ``sandbox_class``: the SDK's
    ``Sandbox`` class or a stand-in with the same interface (tests).
    """

    name = "e2b"

    def __init__(self, api_key: str | None = None, domain: str | None = None,
                 api_url: str | None = None, template: str | None = None,
                 sandbox_timeout_s: int = 600, request_timeout_s: float | None = None,
                 max_workers: int = 64, sandbox_class: Any = None, **create_options: Any):
        self.sandbox_class = sandbox_class or _load_sdk()
        options = {"api_key": api_key or os.environ.get("E2B_API_KEY"),
                   "domain": domain or os.environ.get("E2B_DOMAIN"),
                   "api_url": api_url or os.environ.get("E2B_API_URL"),
                   "template": template, "timeout": int(sandbox_timeout_s),
                   "request_timeout": request_timeout_s, **create_options}
        self.create_options = {k: v for k, v in options.items() if v is not None}
        check_positive_int(max_workers=max_workers)
        self._executor = cf.ThreadPoolExecutor(max_workers, thread_name_prefix="tir-e2b")

    async def _blocking(self, fn, *args, **kwargs):
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    def _create(self):
        cls = self.sandbox_class
        if hasattr(cls, "create"):
            return cls.create(**self.create_options)
        return cls(**self.create_options)  # e2b-code-interpreter 1.x

    async def open(self, limits: Limits) -> Any:
        try:
            return await self._blocking(self._create)
        except Exception as e:  # noqa: BLE001 - auth, quota, network: all infrastructure
            raise SandboxUnavailable(f"E2B could not create a sandbox: {type(e).__name__}: {e}") from e

    async def run(self, handle: Any, code: str, limits: Limits) -> Execution:
        try:
            ex = await self._blocking(handle.run_code, code, timeout=limits.timeout_s)
        except Exception as e:  # noqa: BLE001 - classified below
            return self._failure(e, limits)
        return execution_from_e2b(ex, limits)

    @staticmethod
    def _failure(exc: Exception, limits: Limits) -> Execution:
        name, text = type(exc).__name__, str(exc)
        if name == "TimeoutException" and "Execution timed out" in text:
            return Execution.failure(
                Status.TIMEOUT, f"TimeoutError: the code ran longer than the "
                f"{limits.timeout_s:g} s time limit and was stopped.", lost_state=True)
        return Execution.infra(f"the E2B sandbox failed ({name}: {text[:500]})")

    async def close(self, handle: Any) -> None:
        try:
            await self._blocking(handle.kill)
        except Exception:  # noqa: BLE001 - an expired sandbox is already gone
            pass

    def describe(self) -> dict:
        return {"backend": self.name, "domain": self.create_options.get("domain", "e2b.app")}

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False)
