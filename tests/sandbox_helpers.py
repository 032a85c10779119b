"""Shared helpers of the sandbox tests: one pool per isolation mode for the whole test run,
synchronous wrappers around the async tool, and host-side process inspection."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import random
import time

import pytest

from tir_envs.tools.python import LocalBackend, PythonTool, SandboxUnavailable
from tir_envs.tools.python.pool.launcher import allowed_paths, tmp_binds
from tir_envs.tools.python.limits import Limits

NAMESPACE_MODES = ("bwrap", "unshare")

# Cell code that finds the nonce of the running request on the stack (the sandbox's own
# frames hold it) and the sandbox's own wire module: what a forger starts from.
FIND_NONCE = """
import os, sys, json, struct
proto = sys.modules['sandbox.protocol']
f = sys._getframe()
while f is not None and 'nonce' not in f.f_locals:
    f = f.f_back
nonce = f.f_locals['nonce'] if f is not None else 0
"""


@functools.lru_cache(maxsize=None)
def backend(mode: str) -> LocalBackend | str:
    """A started local backend for ``mode``, or the reason it cannot run on this machine."""
    b = LocalBackend(isolation=mode, spares=2)
    try:
        info = b.pool.wait_ready(timeout=180)
    except SandboxUnavailable as e:
        return str(e)
    if info["isolation"] != mode:
        return f"asked for {mode}, got {info['isolation']}"
    return b


def backend_or_skip(mode: str) -> LocalBackend:
    b = backend(mode)
    if isinstance(b, str):
        pytest.skip(f"isolation {mode!r} is not available on this machine: {b}")
    return b


def require_nproc_enforced(b: LocalBackend) -> None:
    """The kernel exempts uid 0 from RLIMIT_NPROC: skip process-count tests where the
    sandbox could not leave it (the fork server's self-test measured it) and has no pids
    cgroup either (which counts whatever the uid)."""
    info = b.pool.info()
    if not info["fork_server"].get("nproc_enforced") and not info["cgroups"]:
        pytest.skip("neither RLIMIT_NPROC nor a pids cgroup limits the sandbox's uid here")


def make_tool(mode: str = "auto", **kw) -> PythonTool:
    if mode == "auto":
        return PythonTool(backend=LocalBackend(spares=2), **kw)
    return PythonTool(backend=backend_or_skip(mode), **kw)


def limited(**kw) -> Limits:
    return Limits(**kw)


def call(tool: PythonTool, code, session=None):
    """One tool call from synchronous test code (each on a fresh event loop, on purpose)."""
    return asyncio.run(tool.call({"code": code}, session))


def open_session(tool: PythonTool):
    return asyncio.run(tool.open_session())


def close_session(tool: PythonTool, session) -> None:
    asyncio.run(tool.close_session(session))


@contextlib.contextmanager
def session_of(tool: PythonTool):
    """A session of ``tool`` for the ``with`` block, closed however the block ends."""
    s = open_session(tool)
    try:
        yield s
    finally:
        close_session(tool, s)


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_until(predicate, timeout: float = 60.0) -> bool:
    """Poll ``predicate`` until it holds (True) or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def wait_dead(pid: int, timeout: float = 10.0) -> bool:
    return wait_until(lambda: not alive(pid), timeout)


def marker() -> str:
    """Twelve random digits: ``sleep 3000.<marker>`` carries them in its command line."""
    return str(random.SystemRandom().randrange(10**11, 10**12))


def pids_with(mark: str) -> list[int]:
    """Host pids whose command line contains ``mark``."""
    found = []
    needle = mark.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if needle in f.read():
                    found.append(int(name))
        except OSError:
            continue
    return found


def wait_gone(mark: str, timeout: float = 10.0) -> list[int]:
    """Wait until no host process carries ``mark``; return the survivors (empty: all gone)."""
    deadline = time.monotonic() + timeout
    while True:
        left = pids_with(mark)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def wait_present(mark: str, timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        found = pids_with(mark)
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def background_sleep_code(mark: str) -> str:
    """Cell that leaves a daemonised ``sleep 3000.<mark>`` behind (double fork + setsid, so
    it is nobody's child in the session any more); prints 'started'."""
    return (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execvp('sleep', ['sleep', '3000.{mark}'])\n"
        "    os._exit(0)\n"
        "os.wait()\n"
        "time.sleep(0.2)\n"
        "print('started')\n"
    )


def host_binds_in_tmp(extra_binds: tuple[str, ...] = ()) -> list[str]:
    """The allow-listed host paths under ``/tmp`` (a checkout or virtualenv living there, and
    ``extra_binds``): a namespaced cell's fresh ``/tmp`` holds them, bound read-only."""
    return [p for p in tmp_binds(allowed_paths(tuple(extra_binds))) if p.startswith("/tmp/")]


def host_names_in_tmp(extra_binds: tuple[str, ...] = ()) -> list[str]:
    """What ``os.listdir('/tmp')`` shows in a fresh namespaced cell: the first component of
    each of ``host_binds_in_tmp`` (nothing when the project lives outside ``/tmp``)."""
    return sorted({p.split("/")[2] for p in host_binds_in_tmp(extra_binds)})
