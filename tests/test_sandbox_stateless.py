"""Issue 21, item 4: a stateless call is a fork of a warm template, with the guarantees of a
fresh interpreter: no state of an earlier call (variables, patched modules, files, IPC objects,
processes, random state) is visible to the next, nothing it started keeps running, and the
template itself is reused (no session start per call)."""

from __future__ import annotations

import asyncio
import os

import pytest

from tests.sandbox_helpers import (NAMESPACE_MODES, background_sleep_code, backend_or_skip,
                                   call, marker, wait_gone)
from tir_envs.tools.base import Status
from tir_envs.tools.python import LocalBackend, PythonTool
from tir_envs.tools.python.isolation import syscall_filter
from tir_envs.tools.python.limits import Limits

LEAVE = """
import os, sys, math, json, ctypes
x = 41
math.pi = 3
sys.modules['json'].dumps = None
open('/tmp/left', 'w').write('secret')
os.makedirs('/tmp/locked/inner')
os.chmod('/tmp/locked', 0)
libc = ctypes.CDLL(None, use_errno=True)
ipc = (libc.shmget(0x7131, 4096, 0o1666), libc.semget(0x7132, 1, 0o1666),  # IPC_CREAT|0666
       libc.msgget(0x7133, 0o1666))
print('shm', min(ipc) >= 0)
"""
LOOK = """
import os, math, json, ctypes
libc = ctypes.CDLL(None, use_errno=True)
ipc = (libc.shmget(0x7131, 4096, 0o666), libc.semget(0x7132, 1, 0o666), libc.msgget(0x7133, 0o666))
print('x' in globals(), math.pi == 3, json.dumps is None, sorted(os.listdir('/tmp')),
      max(ipc) >= 0, oct(os.stat('/tmp').st_mode & 0o7777))
"""

CELL_CPU_LIMIT = "import resource; print(resource.getrlimit(resource.RLIMIT_CPU))"


@pytest.fixture(params=NAMESPACE_MODES)
def backend(request):
    return backend_or_skip(request.param)


def _no_state_survives(tool: PythonTool) -> None:
    # What a fresh call sees: /tmp is empty but for allow-listed host paths that live under
    # /tmp (a checkout or virtualenv there is bound back read-only), so compare with that.
    fresh = call(tool, LOOK).text.strip()
    assert fresh.startswith("False False False [") and fresh.endswith("] False 0o1777"), fresh
    assert "'left'" not in fresh and "'locked'" not in fresh
    first = call(tool, LEAVE)
    assert first.status == Status.OK and "shm True" in first.text, first.text
    looked = call(tool, LOOK + "os.chmod('/tmp', 0)\n")
    assert looked.status == Status.OK, looked.text
    assert looked.text.strip() == fresh, looked.text
    again = call(tool, LOOK)  # /tmp's mode, changed by the last call, is back too
    assert again.text.strip() == fresh, again.text


def test_no_state_survives_a_call(backend):
    _no_state_survives(PythonTool(backend=backend, stateful=False))


def test_nothing_keeps_running_after_a_call(backend):
    tool = PythonTool(backend=backend, stateful=False)
    mark = marker()
    r = call(tool, background_sleep_code(mark))
    assert r.status == Status.OK and "started" in r.text
    assert wait_gone(mark) == []


def test_one_template_serves_many_calls(backend):
    """Calls fork a warm template (one per fork server: each call draws its server, see
    test_sandbox_hash_seed.py): the pool spawns no session per call."""
    tool = PythonTool(backend=backend, stateful=False)
    call(tool, "1")
    spawned = backend.pool.info()["counters"].get("spawned", 0)
    # issue 29: each cell is pid 1 of a pid namespace of its own, where it sees no other
    # process (neither its template nor an earlier cell)
    cells = [call(tool, "import os; os.getpid(), [p for p in os.listdir('/proc') if "
                        "p.isdigit()]").text for _ in range(10)]
    # a spare refilled for each server's first template, and 2 as before
    assert backend.pool.info()["counters"].get("spawned", 0) - spawned <= \
        backend.config.fork_servers + 2
    assert cells == ["(1, ['1'])"] * 10, cells


def test_a_crash_or_exit_in_a_cell_is_killed_and_the_next_call_is_fresh(backend):
    tool = PythonTool(backend=backend, stateful=False)
    # (a cell is pid 1 of its own pid namespace since issue 29, as a stateful session's
    # interpreter is: a signal it sends itself with the default action is ignored, so the
    # third death is an abort, not os.kill(os.getpid(), SIGKILL))
    for code in ("import os; os._exit(0)", "import ctypes; ctypes.string_at(0)",
                 "import os; os.abort()"):
        r = call(tool, code)
        assert r.status == Status.KILLED, (code, r.text)
        assert call(tool, "print('fine')").text == "fine"


def test_idle_templates_can_be_closed(backend):
    """Warm templates hold memory and a slot: they close after a while unused, or at once."""
    tool = PythonTool(backend=backend, stateful=False)
    call(tool, "1")
    pool = backend.pool
    assert pool.info()["idle_templates"] >= 1
    live = pool.info()["live_sessions"]
    pool.close_idle_templates().result(10)
    info = pool.info()
    assert info["idle_templates"] == 0 and info["live_sessions"] < live
    assert call(tool, "2").text == "2"  # a new template on demand


REACH_TEMPLATE = """
import os
seen = []
others = [p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]
for path in [f'/proc/{p}/{what}' for p in others + ['1'] if p != str(os.getpid())
             for what in ('mem', 'environ', 'fd', 'fd/3', 'map_files')]:
    try:
        os.listdir(path) if path.endswith(('fd', 'files')) else open(path, 'rb').read(1)
        seen.append(path)
    except OSError:
        pass
print(others, seen)
"""


def test_a_cell_cannot_reach_its_template(backend):
    """The template (pid 1 of the session's namespace, same uid as its cells) holds the host's
    socket: a cell can neither read its memory or environment nor open its descriptors
    (since issue 29 it cannot even see it: the cell is pid 1 of a namespace of its own)."""
    tool = PythonTool(backend=backend, stateful=False)
    r = call(tool, REACH_TEMPLATE)
    assert r.status == Status.OK and r.text == "[] []", r.text


def test_ordinary_code_works_in_a_locked_down_cell(backend):
    """What the lock-down must not break: subprocesses, forks and the cell's own /proc."""
    tool = PythonTool(backend=backend, stateful=False)
    code = ("import os, subprocess, sys, multiprocessing as mp\n"
            "out = subprocess.run([sys.executable, '-c', 'print(6 * 7)'], capture_output=True,"
            " text=True).stdout.strip()\n"
            "with mp.get_context('fork').Pool(2) as p:\n    sq = p.map(abs, [-1, -2])\n"
            "print(out, sq, len(os.listdir('/proc/self/fd')) > 2)")
    r = call(tool, code)
    assert r.status == Status.OK and r.text == "42 [1, 2] True", r.text


@pytest.mark.parametrize("mode", NAMESPACE_MODES)
def test_without_a_syscall_filter_each_cell_locks_itself_down(mode, monkeypatch):
    """A host without libseccomp: the template cannot seal itself, so each cell gets an IPC
    namespace of its own and drops its capabilities; the guarantees hold the same."""
    backend_or_skip(mode)
    monkeypatch.setattr(syscall_filter, "cached_bpf", lambda: (None, "not on this host"))
    own = LocalBackend(isolation=mode, spares=1, fork_servers=1, disk_mb=29)
    try:
        tool = PythonTool(backend=own, stateful=False)
        status = call(tool, "print(open('/proc/self/status').read())").text
        assert "Seccomp:\t0" in status and "CapEff:\t0000000000000000" in status, status
        _no_state_survives(tool)
        r = call(tool, CELL_CPU_LIMIT)  # set by each cell (its template has none)
        assert r.text == "(300, 301)", r.text
        r = call(tool, REACH_TEMPLATE)
        assert r.status == Status.OK and r.text == "[] []", r.text
    finally:
        own.shutdown()


WARM_LOOK = """
import os, numpy as np
print(sorted(k for k in globals() if not k.startswith('__')), os.environ.get('LD_BIND_NOW'),
      np.random.get_state()[3:], np.random.normal())
1 / 0
"""


def test_a_call_sees_no_trace_of_the_templates_own_warm_up(backend):
    """Issue 29 item 7: a template runs constant code itself once set up (so that cells
    find that code warm) and reseeds numpy by writing its generator's state directly: each
    call still starts as the first cell of a fresh interpreter (no names, cell 1, no cached
    Gaussian) with its own random state, and without the fork server's ``LD_BIND_NOW``."""
    tool = PythonTool(backend=backend, stateful=False)
    seen = set()
    for _ in range(4):
        r = call(tool, WARM_LOOK)
        assert r.status == Status.ERROR, r.text
        assert "['np', 'os'] None (0, 0.0) " in r.text and '"<cell-1>", line 5' in r.text, r.text
        assert "ZeroDivisionError" in r.text and "ValueError" not in r.text, r.text
        seen.add(r.text.split("(0, 0.0) ")[1].split()[0])
    assert len(seen) == 4, seen


MARK_NOFILE = 173  # a limit no other test sets: it finds this test's template among the host's


def _limit(pid: int, name: str) -> list[str]:
    """(soft, hard) of the limit ``name`` (``Max <name>``) in ``/proc/<pid>/limits``."""
    with open(f"/proc/{pid}/limits") as f:
        row = next(line for line in f if line.startswith(f"Max {name} "))
    return row[len(f"Max {name} "):].split()[:2]


def _marked_processes(root: int) -> list[int]:
    """Processes below ``root`` (a fork server) that have ``MARK_NOFILE`` as their limit."""
    found = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and _limit(int(name), "open files") == [str(MARK_NOFILE)] * 2:
                pid = int(name)
                while pid > 1 and pid != root:
                    pid = int(_stat(pid)[1])
                if pid == root:
                    found.append(int(name))
        except (OSError, StopIteration):
            continue
    return found


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def _cpu_s(pid: int) -> float:
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _calls_until(tool: PythonTool, template: int, cpu_s: float) -> tuple[dict, int]:
    """One-shot calls until ``template`` has used ``cpu_s`` of its own CPU (or is gone):
    (their outcomes by status and text, how many)."""
    seen: dict = {}
    for n in range(1, 50_001):
        r = await tool.call({"code": "print(6 * 7)"})
        key = (str(r.status), r.text[:200])
        seen[key] = seen.get(key, 0) + 1
        try:
            if _cpu_s(template) > cpu_s:
                break
        except OSError:
            break
    return seen, n


@pytest.mark.parametrize("mode", (*NAMESPACE_MODES, "rlimits"))
def test_the_cpu_limit_binds_each_cell_never_its_template(mode):
    """``RLIMIT_CPU`` counts a process's own CPU over its life, and a stateless template's
    grows with every call it serves (~2 ms a call), whoever's call it is.  With the limit on
    the template, the kernel killed it once that reached ``cpu_s`` + 1 s, in the middle of
    some innocent call (at the default 300 s after ~150,000 calls): here, with ``cpu_s=1``,
    after 1,444-1,921 calls the call of ``print(6 * 7)`` came back ``killed`` by SIGKILL,
    charged to the model.  The limit binds each cell (from 0, its own CPU) instead: the
    template serves calls well past twice the hard limit of its own CPU, while a cell that
    spins still hits it.  Neither the keeper nor the fork server gets a CPU limit either."""
    backend_or_skip(mode)
    own = LocalBackend(isolation=mode, spares=1, fork_servers=1)
    try:
        tool = PythonTool(backend=own, stateful=False, timeout_s=120,
                          limits=Limits(cpu_s=1, nofile=MARK_NOFILE))
        r = call(tool, CELL_CPU_LIMIT)
        assert r.status == Status.OK and r.text == "(1, 2)", r.text
        (root,) = [s["pid"] for s in own.pool.info()["fork_servers"]]
        (template,) = _marked_processes(root)
        spawned = own.pool.info()["counters"].get("spawned", 0)
        seen, n = asyncio.run(_calls_until(tool, template, 4.0))
        assert seen == {("ok", "42"): n}, seen
        assert _cpu_s(template) > 4.0 and own.pool.info()["counters"].get("spawned", 0) == spawned
        r = call(tool, "while True:\n    pass")
        assert r.status == Status.KILLED and "CPULimitExceeded" in r.text, r.text
        assert call(tool, "print(6 * 7)").text == "42"
        assert _marked_processes(root) == [template]
        keeper = int(_stat(template)[1])
        server = int(_stat(keeper)[1])
        ours = _limit(os.getpid(), "cpu time")  # what every process here inherits
        assert [_limit(p, "cpu time") for p in (template, keeper, server)] == [ours] * 3
    finally:
        own.shutdown()
