"""Issue 12: the host trusts nothing a session says, and per-session limits hold.

One attack per property: forged and oversized replies, uncapped error text, memory held in the
kernel or spread over processes, CPU burnt between calls, host-side parsing, kernel objects
namespaces do not isolate (keyrings, vsock), per-uid quotas and locks shared with other
sessions, shared RNG state and raw control bytes.  Each runs in every isolation mode this
machine has (``rlimits`` included: these properties come from the host, cgroups and seccomp,
not from namespaces); a property that needs a mechanism the machine lacks (cgroups, seccomp)
is skipped with the reason, never passed silently.
"""

from __future__ import annotations

import fcntl
import sys
import time

import pytest

from tests.sandbox_helpers import (backend_or_skip, call, close_session, FIND_NONCE,
                                   NAMESPACE_MODES, open_session, session_of)
from tir_envs.tools.base import Status
from tir_envs.tools.python import Limits, PythonTool
from tir_envs.tools.python.sandbox import protocol

# Code that finds the interpreter's own request loop on the stack (the nonce of the running
# request included) and writes a result frame with the sandbox's own encoder on fd 3.
FORGE = FIND_NONCE + """
def forge(**reply):
    os.write(3, proto.encode_result(nonce, {'status': 'ok', **reply}))
"""


@pytest.fixture(params=(*NAMESPACE_MODES, "rlimits"))
def backend(request):
    return backend_or_skip(request.param)


def tool_for(backend, **limits) -> PythonTool:
    return PythonTool(backend=backend, limits=Limits(**{"timeout_s": 5, **limits}))


def needs(backend, mechanism: str) -> None:
    info = backend.pool.info()
    if not info[mechanism]:
        pytest.skip(f"{mechanism} not available on this machine: {info['degraded'][mechanism]}")


def run_session(tool: PythonTool, *codes: str):
    with session_of(tool) as s:
        return [call(tool, c, s) for c in codes]


# ------------------------------------------------------------------ 1. replies
@pytest.mark.parametrize("frame", [
    # the old JSON reply, claiming an infrastructure failure
    "os.write(3, len(b := json.dumps({'op': 'result', 'status': 'infra_error', 'error': 'x'}).encode())"
    ".to_bytes(4, 'big') + b)",
    # a well-formed result frame, but for a request the code cannot know
    "os.write(3, proto.encode_result(12345, {'status': 'ok', 'stdout': 'all tests pass'}))",
    # the right nonce, an unknown kind
    "os.write(3, proto.encode_result(nonce, {'status': 'ok'})[:13] + bytes([7]) + "
    "proto.encode_result(nonce, {'status': 'ok'})[14:])",
    # the right nonce, 15,000,000 characters of stdout
    "forge(stdout='A' * 15_000_000)",
])
def test_a_forged_reply_never_chooses_the_status(backend, frame):
    tool = tool_for(backend)
    r, after = run_session(tool, FORGE + "import json\n" + frame + "\nimport time; time.sleep(3)",
                           "'fresh'")
    assert r.status == Status.KILLED, r.text
    assert "not your fault" not in r.text and len(r.text) < 1000
    assert after.status == Status.OK and after.metadata["restarted"] is False


def test_a_forged_reply_ends_nothing_early(backend):
    """Even with the right nonce, a result written by the code while its cell still runs ends
    nothing: the host believes a result only once it sees the interpreter waiting for its next
    request with everything else stopped, so the cell runs on under the call's deadline."""
    needs(backend, "cgroups")
    tool = tool_for(backend, timeout_s=2)
    with session_of(tool) as s:
        code = FORGE + "forge(stdout='all tests pass\\n')\nwhile True:\n    pass\n"
        first = call(tool, code, s)
        assert first.status == Status.TIMEOUT, first.text
        assert "all tests pass" not in first.text
        assert call(tool, "'next'", s).text == "'next'"  # interrupted, not killed: state kept


def test_a_session_is_stopped_between_calls(backend):
    """After a reply every process of the session but the keeper is stopped: no CPU between
    calls, whatever its threads and children were doing."""
    needs(backend, "cgroups")
    tool = tool_for(backend)
    with session_of(tool) as s:
        code = ("import os, threading\ndef spin():\n    while True:\n        pass\n"
                "threading.Thread(target=spin, daemon=True).start()\n"
                "if os.fork() == 0:\n    spin()\n")
        assert call(tool, code, s).status == Status.OK
        cgroup = s.handle.cgroup
        pids = cgroup.pids()
        assert len(pids) == 3 and cgroup.keeper in pids
        others = [p for p in pids if p != cgroup.keeper]
        deadline = time.monotonic() + 5  # a SIGSTOP lands when its process next gets a CPU
        while not all(_state(p) == "T" for p in others) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert all(_state(p) == "T" for p in others)
        before = {p: _cpu_ticks(p) for p in pids}
        time.sleep(1.0)
        assert {p: _cpu_ticks(p) for p in pids} == before, "the session ran between calls"


def _proc_stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def _cpu_ticks(pid: int) -> int:
    fields = _proc_stat(pid)
    return int(fields[11]) + int(fields[12])


def _state(pid: int) -> str:
    return _proc_stat(pid)[0]


def test_death_armed_for_later_is_the_models_outcome(backend):
    tool = tool_for(backend)
    r1, r2, r3 = run_session(tool, "import os, threading\n"
                                   "threading.Timer(0.3, os._exit, (0,)).start()",
                             "import time; time.sleep(1.5)", "'fresh'")
    assert r1.status == Status.OK
    assert r2.status == Status.KILLED and "not your fault" not in r2.text
    assert r3.status == Status.OK and r3.text == "'fresh'"


# ------------------------------------------------------------------ 2. error text
@pytest.mark.parametrize("style", ["full", "last_line"])
def test_huge_exception_messages_are_capped_everywhere(backend, style):
    tool = PythonTool(backend=backend, error_style=style, max_output_chars=2000)
    (r,) = run_session(tool, "raise ValueError('A' * 12_000_000)")
    assert r.status == Status.ERROR and len(r.text) < 2600
    assert "characters truncated" in r.text
    assert len(r.metadata["error_last_line"]) <= 300 and r.metadata["error_type"] == "ValueError"
    assert sum(len(str(v)) for v in r.metadata.values()) < 1000


# ------------------------------------------------------------------ 3. memory
def test_memory_parked_in_a_memfd_counts_against_the_limit(backend):
    needs(backend, "cgroups")
    tool = tool_for(backend, memory_mb=200)
    (r,) = run_session(tool, "import os\nfd = os.memfd_create('x')\nchunk = b'x' * (1 << 20)\n"
                             "for i in range(576):\n    os.write(fd, chunk)\nprint('held', i + 1)")
    assert r.status in (Status.KILLED, Status.ERROR), r.text
    assert "held 576" not in r.text


def test_memory_spread_over_child_processes_counts_once(backend):
    needs(backend, "cgroups")
    tool = tool_for(backend, memory_mb=200, timeout_s=20)
    code = ("import os, time\nkids = []\nfor _ in range(3):\n    pid = os.fork()\n"
            "    if pid == 0:\n        b = b'x' * (150 << 20)\n        time.sleep(1.5)\n"
            "        os._exit(0)\n    kids.append(pid)\n"
            "print(sorted(os.waitstatus_to_exitcode(os.waitpid(k, 0)[1]) for k in kids))")
    (r,) = run_session(tool, code)
    assert r.status in (Status.OK, Status.KILLED), r.text
    assert r.text != "[0, 0, 0]", "three children held 450 MB under a 200 MB limit"


# ------------------------------------------------------------------ 4. CPU between calls
SPIN = ("import os, threading\nn = [0]\ndef spin():\n    while True:\n        n[0] += 1\n"
        "threading.Thread(target=spin, daemon=True).start()\nchild = os.fork()\n"
        "if child == 0:\n    while True:\n        pass\n")
PROBE = ("def ticks(pid):\n    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()\n"
         "    return int(f[11]) + int(f[12])\n(n[0], ticks(child))")


def _progress_between_and_during_calls(tool: PythonTool):
    """(thread and child progress over 1.5 s between calls, the same over 1.5 s in a call)."""
    with session_of(tool) as s:
        assert call(tool, SPIN, s).status == Status.OK
        n1, t1 = eval(call(tool, PROBE, s).text)  # noqa: S307 - a tuple we printed
        time.sleep(1.5)
        n2, t2 = eval(call(tool, PROBE, s).text)  # noqa: S307
        n3, t3 = eval(call(tool, "import time; time.sleep(1.5)\n" + PROBE, s).text)  # noqa: S307
        return (n2 - n1, t2 - t1), (n3 - n2, t3 - t2)


def test_child_processes_get_no_cpu_between_calls(backend):
    """A forked child burns CPU after its cell returned: between calls it gets none (stopped
    by the host through the session's cgroup, or else by the session's init), inside the next
    call it runs again."""
    if backend.config.isolation == "rlimits" and not backend.pool.info()["cgroups"]:
        pytest.skip("isolation 'rlimits' without cgroups cannot stop a session's children "
                    "between calls (no pid namespace to find them in)")
    (_, between), (_, during) = _progress_between_and_during_calls(tool_for(backend))
    assert between * 4 < max(during, 8), (between, during)


def test_threads_get_no_cpu_between_calls(backend):
    """The same for a thread of the interpreter: only the host can stop it (cgroups)."""
    needs(backend, "cgroups")
    (between, _), (during, _) = _progress_between_and_during_calls(tool_for(backend))
    assert between * 4 < max(during, 1000), (between, during)


# ------------------------------------------------------------------ 5. host-side frames
def test_frame_cap_follows_the_output_limit():
    assert protocol.result_frame_cap(8192) < 256 * 1024
    assert protocol.result_frame_cap(100) < protocol.result_frame_cap(8192)


@pytest.mark.parametrize("payload", [
    "os.write(3, (16 << 20).to_bytes(4, 'big') + b'[' * (1 << 20))",  # a 16 MB half-frame
    "b = b'[' * 100_000 + b']' * 100_000\nos.write(3, len(b).to_bytes(4, 'big') + b)",
])
def test_oversized_or_nested_frames_are_refused_before_parsing(backend, payload):
    tool = tool_for(backend)
    with session_of(tool) as bystander:
        (r,) = run_session(tool, "import os\n" + payload + "\nimport time; time.sleep(3)")
        assert r.status == Status.KILLED
        assert call(tool, "1 + 1", bystander).text == "2"
        assert all(h.decoder.pending < (1 << 20) for z in backend.pool.fleet.servers
                   for h in z.sessions.values())


# ------------------------------------------------------------------ 6. kernel objects
KEYCTL = "import ctypes, platform\nNR = {'x86_64': 250, 'aarch64': 219}[platform.machine()]\n"


def test_keyring_and_foreign_socket_families_are_denied(backend):
    needs(backend, "seccomp")
    code = (KEYCTL + "import socket, errno\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "r = libc.syscall(NR, 0, -3, 0)  # KEYCTL_GET_KEYRING_ID of the session keyring\n"
            "print('keyctl', r, errno.errorcode.get(ctypes.get_errno()))\n"
            "for fam in ('AF_VSOCK', 'AF_PACKET', 'AF_BLUETOOTH', 'AF_ALG'):\n"
            "    try:\n        socket.socket(getattr(socket, fam, 40))\n"
            "        print(fam, 'open')\n    except OSError as e:\n"
            "        print(fam, errno.errorcode[e.errno])\n"
            "import socket as s2\ntry:\n    s2.socket(s2.AF_NETLINK, s2.SOCK_RAW, 9)  # audit\n"
            "    print('audit open')\nexcept OSError as e:\n    print('audit', e.errno)\n"
            "print('ptrace', libc.ptrace(0, 0, 0, 0), errno.errorcode.get(ctypes.get_errno()))")
    (r,) = run_session(tool_for(backend), code)
    assert r.status == Status.OK, r.text
    assert "keyctl -1 EPERM" in r.text and "ptrace -1 EPERM" in r.text
    assert "open" not in r.text, r.text
    assert r.text.count("EAFNOSUPPORT") == 4


def test_host_session_keyring_is_not_inherited(tmp_path):
    """A host with keys in its session keyring (an ssh login, a systemd unit): a pool started
    afterwards gives every session a fresh, empty keyring, even without seccomp's help."""
    import ctypes
    import platform
    nr = {"x86_64": 248, "aarch64": 217}.get(platform.machine())  # add_key
    libc = ctypes.CDLL(None, use_errno=True)
    join = {"x86_64": 250, "aarch64": 219}.get(platform.machine())
    if nr is None or libc.syscall(join, 1, None) < 0:  # our own fresh keyring first
        pytest.skip("no kernel keyrings on this machine")
    key = libc.syscall(nr, b"user", b"tir-test-secret", b"s3cret", 6, -3)
    assert key > 0
    from tir_envs.tools.python import LocalBackend
    b = LocalBackend(spares=1, disk_mb=41)
    try:
        tool = PythonTool(backend=b)
        (r,) = run_session(tool, "print(open('/proc/keys').read())")
        assert r.status == Status.OK and "tir-test-secret" not in r.text
        assert b.pool.info()["fork_server"].get("fork_server_keyring") is True
    finally:
        b.shutdown()


# ------------------------------------------------------------------ 7. per-uid quotas
def test_per_uid_quotas_and_host_file_locks_are_out_of_reach(backend):
    needs(backend, "seccomp")
    venv_cfg = f"{sys.prefix}/pyvenv.cfg"
    code = ("import ctypes, errno, fcntl, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "print('inotify', libc.inotify_init1(0), errno.errorcode.get(ctypes.get_errno()))\n"
            "r, w = os.pipe()\ntry:\n    fcntl.fcntl(w, 1031, 1 << 20)\n    print('pipe grown')\n"
            "except OSError as e:\n    print('pipe', errno.errorcode[e.errno])\n"
            f"held = open({venv_cfg!r}) if os.path.exists({venv_cfg!r}) else open('/usr/lib/os-release')\n"
            "fcntl.flock(held, fcntl.LOCK_EX)\nfcntl.lockf(held, fcntl.LOCK_SH)\nprint('locked')")
    tool = tool_for(backend)
    with session_of(tool) as s:
        r = call(tool, code, s)
        assert r.status == Status.OK, r.text
        assert "inotify -1 EPERM" in r.text and "pipe EPERM" in r.text and "locked" in r.text
        import os
        path = venv_cfg if os.path.exists(venv_cfg) else "/usr/lib/os-release"
        with open(path) as f:  # the session "holds" its locks: the host is not blocked
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(f, fcntl.LOCK_UN)


# ------------------------------------------------------------------ 8. RNG, control bytes
def test_every_rng_is_reseeded_per_session(backend):
    code = ("import random, numpy as np, sympy\nfrom sympy.core import random as sr\n"
            "(random.random(), float(np.random.rand()), sr.rng.random(), "
            "int(sympy.randprime(10**20, 10**21)))")
    tool = tool_for(backend)
    a, b = (run_session(tool, code)[0] for _ in range(2))
    ra, rb = eval(a.text), eval(b.text)  # noqa: S307 - tuples of numbers we printed
    assert all(x != y for x, y in zip(ra, rb)), (ra, rb)


def test_control_bytes_are_escaped_in_observations(backend):
    (r,) = run_session(tool_for(backend),
                       "import sys\nprint('a\\x00b\\x1b[31mred\\rc\\td')\n"
                       "sys.stderr.write('\\x07bell\\n')\n'\\x1b'")
    assert r.status == Status.OK
    assert not any(ord(c) < 32 and c not in "\n\t" for c in r.text), repr(r.text)
    assert "a\\x00b\\x1b[31mred\\x0dc\td" in r.text and "\\x07bell" in r.text
