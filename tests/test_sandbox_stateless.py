"""Issue 21, item 4: a stateless call is a fork of a warm template, with the guarantees of a
fresh interpreter: no state of an earlier call (variables, patched modules, files, IPC objects,
processes, random state) is visible to the next, nothing it started keeps running, and the
template itself is reused (no session start per call)."""

from __future__ import annotations

import pytest

from tests.sandbox_helpers import (NAMESPACE_MODES, background_sleep_code, backend_or_skip,
                                   call, marker, wait_gone)
from tir_envs.tools.base import ToolStatus
from tir_envs.tools.python import PythonTool

LEAVE = """
import os, sys, math, json, ctypes
x = 41
math.pi = 3
sys.modules['json'].dumps = None
open('/tmp/left', 'w').write('secret')
os.makedirs('/tmp/locked/inner')
os.chmod('/tmp/locked', 0)
libc = ctypes.CDLL(None, use_errno=True)
shm = libc.shmget(0x7131, 4096, 0o1666)   # IPC_CREAT | 0666
print('shm', shm >= 0)
"""
LOOK = """
import os, math, json, ctypes
libc = ctypes.CDLL(None, use_errno=True)
print('x' in globals(), math.pi == 3, json.dumps is None, sorted(os.listdir('/tmp')),
      libc.shmget(0x7131, 4096, 0o666) >= 0, oct(os.stat('/tmp').st_mode & 0o7777))
"""


@pytest.fixture(params=NAMESPACE_MODES)
def backend(request):
    return backend_or_skip(request.param)


def test_no_state_survives_a_call(backend):
    tool = PythonTool(backend=backend, stateful=False)
    # What a fresh call sees: /tmp is empty but for allow-listed host paths that live under
    # /tmp (a checkout or virtualenv there is bound back read-only), so compare with that.
    fresh = call(tool, LOOK).text.strip()
    assert fresh.startswith("False False False [") and fresh.endswith("] False 0o1777"), fresh
    assert "'left'" not in fresh and "'locked'" not in fresh
    first = call(tool, LEAVE)
    assert first.status == ToolStatus.OK and "shm True" in first.text, first.text
    looked = call(tool, LOOK + "os.chmod('/tmp', 0)\n")
    assert looked.status == ToolStatus.OK, looked.text
    assert looked.text.strip() == fresh, looked.text
    again = call(tool, LOOK)  # /tmp's mode, changed by the last call, is back too
    assert again.text.strip() == fresh, again.text


def test_nothing_keeps_running_after_a_call(backend):
    tool = PythonTool(backend=backend, stateful=False)
    mark = marker()
    r = call(tool, background_sleep_code(mark))
    assert r.status == ToolStatus.OK and "started" in r.text
    assert wait_gone(mark) == []


def test_one_template_serves_many_calls(backend):
    """Calls fork a warm template (one per fork server: each call draws its server, see
    test_sandbox_hash_seed.py): the pool spawns no session per call."""
    tool = PythonTool(backend=backend, stateful=False)
    call(tool, "1")
    spawned = backend.pool.info()["counters"].get("spawned", 0)
    # a pid counts within its template's pid namespace (the template is its pid 1), so
    # the namespace tells the templates (one per fork server) apart
    cells = {call(tool, "import os; os.getpid(), os.readlink('/proc/self/ns/pid')").text
             for _ in range(10)}
    # a spare refilled for each server's first template, and 2 as before
    assert backend.pool.info()["counters"].get("spawned", 0) - spawned <= \
        backend.config.fork_servers + 2
    assert len(cells) == 10  # each cell its own process, never the template (pid 1)
    assert not any(cell.startswith("(1,") for cell in cells)


def test_a_crash_or_exit_in_a_cell_is_killed_and_the_next_call_is_fresh(backend):
    tool = PythonTool(backend=backend, stateful=False)
    for code in ("import os; os._exit(0)", "import ctypes; ctypes.string_at(0)",
                 "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"):
        r = call(tool, code)
        assert r.status == ToolStatus.KILLED, (code, r.text)
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
