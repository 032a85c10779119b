"""Failure semantics: a dead or wedged worker or fork server is replaced, the session reports
``infra_error``, the caller never hangs, and nothing is left running — also when the host
process itself is killed.  Each test uses its own pool, since it breaks it on purpose."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.sandbox_helpers import (backend_or_skip, background_sleep_code, call, close_session,
                                   marker, NAMESPACE_MODES, open_session, session_of, wait_dead,
                                   wait_gone, wait_present)
from tir_envs.tools.base import Status
from tir_envs.tools.python import LocalBackend, PythonTool, SandboxUnavailable

REPO = Path(__file__).resolve().parents[1]
NS = pytest.mark.parametrize("mode", NAMESPACE_MODES)


def own_backend(mode: str, **kw) -> LocalBackend:
    """A pool of its own (a distinct configuration), in ``mode`` if this machine has it;
    one fork server unless asked (these tests kill or wedge "the" fork server; several
    servers, one of them lost, are tested in test_sandbox_hash_seed.py)."""
    backend_or_skip(mode)  # skip early when the mode is unavailable
    kw.setdefault("fork_servers", 1)
    kw.setdefault("disk_mb", 17 + len(kw) + os.getpid() % 7)
    return LocalBackend(isolation=mode, spares=1, **kw)


def fork_server_pid(backend: LocalBackend) -> int:
    """Host pid of the fork server itself (under bwrap, the Python child of bwrap)."""
    top = backend.pool._fork_server.proc.pid
    for _ in range(100):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat") as f:
                    comm, rest = f.read().rsplit(")", 1)
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if b"sandbox.zygote" not in cmd or "(bwrap" in comm:
                continue
            if int(name) == top or int(rest.split()[1]) in _bwrap_chain(top):
                return int(name)
        time.sleep(0.05)
    raise AssertionError("fork server process not found")


def _bwrap_chain(top: int) -> set[int]:
    chain = {top}
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat") as f:
                parts = f.read().rsplit(")", 1)
            if "(bwrap" in parts[0] and int(parts[1].split()[1]) in chain:
                chain.add(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return chain


def test_interpreter_killed_by_its_own_code_after_a_call_is_killed_not_infra():
    """A cell that arms its own death for later (a timer thread calling os._exit) is the
    model's outcome at the next call, never an infrastructure error (issue 12)."""
    t = PythonTool(backend=LocalBackend(spares=1, disk_mb=40))
    with session_of(t) as s:
        r = call(t, "v = 1\nimport os, threading\nthreading.Timer(0.2, os._exit, (0,)).start()", s)
        assert r.status == Status.OK
        time.sleep(1.0)
        r = call(t, "import time; time.sleep(1); v", s)
        assert r.status == Status.KILLED and "not your fault" not in r.text
        assert r.metadata["restarted"]
        r = call(t, "'fresh'", s)
        assert r.status == Status.OK and r.text == "'fresh'"
        assert s.restarts == 1


@NS
def test_fork_server_killed_mid_call(mode):
    backend = own_backend(mode)
    t = PythonTool(backend=backend, timeout_s=60)
    idle, busy = open_session(t), open_session(t)
    mark = marker()
    results = {}
    try:
        call(t, "v = 1", idle)
        worker = threading.Thread(target=lambda: results.setdefault("busy", call(
            t, f"import subprocess\nsubprocess.run(['sleep', '3000.{mark}'])", busy)))
        worker.start()
        assert wait_present(mark)
        old = backend.pool._fork_server.proc.pid
        os.kill(old, signal.SIGKILL)
        worker.join(30)
        assert results["busy"].status == Status.INFRA_ERROR
        assert wait_gone(mark) == []
        assert call(t, "v", idle).status == Status.INFRA_ERROR
        r = call(t, "'back'", idle)
        assert r.status == Status.OK and r.text == "'back'"
        assert backend.pool._fork_server.proc.pid != old
        assert backend.pool.info()["counters"]["fork_server_starts"] == 2
    finally:
        close_session(t, idle)
        close_session(t, busy)
        backend.shutdown()


@NS
def test_wedged_fork_server_never_hangs_a_caller(mode):
    backend = own_backend(mode, unresponsive_s=2.0, ready_timeout_s=5.0)
    t = PythonTool(backend=backend, timeout_s=1)
    s = open_session(t)
    pid = fork_server_pid(backend)
    try:
        call(t, "v = 1", s)
        os.kill(pid, signal.SIGSTOP)
        assert call(t, "v + 1", s).text == "2"  # a live session does not need the fork server
        r = call(t, "while True:\n    pass", s)  # the interrupt cannot be delivered
        assert r.status == Status.TIMEOUT and r.metadata["restarted"]
        r = call(t, "'recovered'", s)  # a spare, or a new fork server once the hung one is gone
        assert r.status in (Status.OK, Status.INFRA_ERROR)
        deadline = time.monotonic() + 20
        while backend.pool.info()["counters"].get("fork_server_deaths", 0) < 1:
            assert time.monotonic() < deadline, "the hung fork server was never replaced"
            time.sleep(0.1)
        assert call(t, "'recovered'", s).text == "'recovered'"
    finally:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        close_session(t, s)
        backend.shutdown()
    assert wait_dead(pid)


def test_full_pool_is_infra_error_after_open_timeout():
    t = PythonTool(backend=LocalBackend(spares=0, max_sessions=1, open_timeout_s=1.0,
                                        disk_mb=41))
    deadline = time.monotonic() + 120  # the fork server's start (longer than the 1 s open
    while True:                         # timeout on a loaded machine) is not what is tested
        try:
            t.backend.pool.wait_ready(timeout=120)
            break
        except SandboxUnavailable:
            assert time.monotonic() < deadline
    with session_of(t) as s:
        assert call(t, "1", s).text == "1"
        r = call(t, "2")  # needs a second interpreter; the pool allows one
        assert r.status == Status.INFRA_ERROR and "max_sessions=1" in r.text
    assert call(t, "3").text == "3"  # the slot is free again


def test_start_failure_is_reported_and_auto_falls_back():
    backend_or_skip("bwrap")  # the failure below must come from the bad bind alone
    broken = PythonTool(backend=LocalBackend(isolation="bwrap", extra_binds=("/no/such/dir",)))
    r = call(broken, "1")
    assert r.status == Status.INFRA_ERROR and "/no/such/dir" in r.text
    fallback = LocalBackend(isolation="auto", extra_binds=("/no/such/dir",))
    info = fallback.pool.wait_ready(timeout=120)
    assert info["isolation"] in ("unshare", "rlimits") and "bwrap" in info["failed_modes"]
    fallback.shutdown()


HOST_SCRIPT = """
import asyncio, sys
sys.path.insert(0, {repo!r})
from tir_envs.tools.python import LocalBackend, PythonTool, SandboxUnavailable
tool = PythonTool(backend=LocalBackend(isolation={mode!r}, spares=1))
async def main():
    session = await tool.open_session()
    result = await tool.call({{"code": {code!r}}}, session)
    servers = tool.backend.pool.wait_all_servers(timeout=120)["fork_servers"]
    print(result.text, *(s["pid"] for s in servers), flush=True)
    await asyncio.sleep(3600)
asyncio.run(main())
"""


@NS
def test_host_killed_leaves_nothing_behind(mode):
    backend_or_skip(mode)
    mark = marker()
    script = HOST_SCRIPT.format(repo=str(REPO), mode=mode, code=background_sleep_code(mark))
    host = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        text, *servers = host.stdout.readline().split()
        assert text == "started" and wait_present(mark) and len(servers) == 4
    finally:
        host.kill()
        host.wait()
    assert wait_gone(mark) == []
    assert all(wait_dead(int(pid)) for pid in servers)


FORK_SCRIPT = """
import asyncio, os, sys
sys.path.insert(0, {repo!r})
from tir_envs.tools.python import PythonTool
tool = PythonTool()
session = asyncio.run(tool.open_session())
print("parent", asyncio.run(tool.call({{"code": "p = 1\\np"}}, session)).text, flush=True)
pid = os.fork()
if pid == 0:
    print("child", asyncio.run(tool.call({{"code": "40 + 2"}})).text, flush=True)
    os._exit(0)
os.waitpid(pid, 0)
print("parent", asyncio.run(tool.call({{"code": "p + 1"}}, session)).text, flush=True)
"""


def test_forked_host_gets_its_own_pool():
    out = subprocess.run([sys.executable, "-c", FORK_SCRIPT.format(repo=str(REPO))],
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.split("\n")[:3] == ["parent 1", "child 42", "parent 2"], out.stderr
