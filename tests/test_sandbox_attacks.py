"""The attack suite: code a model (or an adversary) might run, and proof that each attempt
fails while the host, the fork server and a bystander session carry on.

Runs under every namespace isolation mode this machine provides (``bwrap``, ``unshare``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.sandbox_helpers import (backend_or_skip, background_sleep_code, call, close_session,
                                   marker, NAMESPACE_MODES, open_session, require_nproc_enforced,
                                   session_of, wait_gone, wait_present)
from tir_envs.tools.base import Status
from tir_envs.tools.python import Limits, PythonTool

REPO = Path(__file__).resolve().parents[1]
SITE = next(p for p in sys.path if p.endswith("site-packages"))


@pytest.fixture(params=NAMESPACE_MODES)
def arena(request):
    """(tool, bystander session) in one mode; checks afterwards that the fork servers and the
    bystander survived whatever the test ran."""
    backend = backend_or_skip(request.param)
    tool = PythonTool(backend=backend, limits=Limits(timeout_s=3, nproc=16, memory_mb=512))
    pool = backend.pool
    deaths = pool.info()["counters"].get("fork_server_deaths", 0)
    bystander = open_session(tool)
    fork_server = bystander.handle.fork_server
    assert call(tool, "alive = 'yes'", bystander).status == Status.OK
    yield tool
    assert call(tool, "alive", bystander).text == "'yes'", "the bystander session was hurt"
    assert fork_server.proc.poll() is None, "the bystander's fork server died"
    close_session(tool, bystander)
    assert pool.info()["counters"].get("fork_server_deaths", 0) == deaths, \
        "a fork server died"


def test_read_etc_passwd(arena):
    r = call(arena, "print(open('/etc/passwd').read())")
    assert r.status == Status.ERROR and "FileNotFoundError" in r.text
    assert "root:x:0:0" not in r.text


def test_read_project_dir(arena):
    code = (f"import os\n"
            f"print(os.path.exists({str(REPO)!r}) and sorted(os.listdir({str(REPO)!r})))\n"
            f"open({str(REPO / 'pyproject.toml')!r}).read()")
    r = call(arena, code)
    assert r.status == Status.ERROR and "FileNotFoundError" in r.text
    assert "pyproject.toml" not in r.text.splitlines()[0] and "tir_envs" not in r.text.splitlines()[0]


def test_write_outside_workdir(arena):
    targets = ["/evil", "/usr/evil", "/etc/evil", f"{SITE}/evil.py", str(REPO / "evil.txt"),
               "/proc/evil", "/dev/evil"]
    code = ("import os\nfor path in %r:\n"
            "    try:\n"
            "        with open(path, 'w') as f:\n"
            "            f.write('pwned')\n"
            "        print('WROTE', path)\n"
            "    except OSError as e:\n"
            "        print('refused', path, type(e).__name__)\n") % (targets,)
    r = call(arena, code)
    # a checkout under /tmp lies inside the session's private /tmp: writing there is allowed
    # (and lands in the session's tmpfs, which the host check below proves)
    verdicts = dict(line.split()[1::-1] for line in r.text.splitlines())
    assert set(verdicts) == set(targets)
    assert all(v == "refused" for p, v in verdicts.items() if not p.startswith("/tmp/"))
    for path in targets:
        if not path.startswith(("/proc", "/dev")):
            assert not os.path.exists(path)


def test_open_a_socket(arena):
    code = ("import socket, urllib.request\n"
            "for target in [('1.1.1.1', 443), ('127.0.0.1', 22)]:\n"
            "    try:\n"
            "        socket.create_connection(target, timeout=2)\n"
            "        print('CONNECTED', target)\n"
            "    except OSError as e:\n"
            "        print('refused', type(e).__name__)\n"
            "try:\n"
            "    urllib.request.urlopen('http://example.com', timeout=2)\n"
            "    print('CONNECTED http')\n"
            "except OSError as e:\n"
            "    print('refused', type(e).__name__)\n")
    r = call(arena, code)
    assert "CONNECTED" not in r.text and r.text.count("refused") == 3


def test_fork_bomb(arena):
    require_nproc_enforced(arena.backend)  # never let a bomb loose where it is not bounded
    r = call(arena, "import os\nwhile True:\n    try:\n        os.fork()\n"
                    "    except OSError:\n        pass")
    assert r.status == Status.TIMEOUT
    assert call(arena, "1 + 1").text == "2"


def test_allocate_64_gb(arena):
    with session_of(arena) as s:
        r = call(arena, "x = bytearray(64 * 2**30)", s)
        assert r.status == Status.KILLED and "MemoryError" in r.text
        r = call(arena, "import numpy as np\ny = np.ones(8 * 2**30)", s)
        assert r.status == Status.KILLED and "MemoryError" in r.text
        assert call(arena, "'still here'", s).text == "'still here'"


def test_busy_loop(arena):
    with session_of(arena) as s:
        call(arena, "keep = 1", s)
        r = call(arena, "while True:\n    pass", s)
        assert r.status == Status.TIMEOUT
        assert call(arena, "keep", s).text == "1"  # interrupted, not killed: state kept


def test_print_1_gb(arena):
    r = call(arena, "line = 'x' * 2**20\nfor _ in range(1024):\n    print(line)\nprint('end')")
    limit = arena.limits.max_output_chars
    assert r.status == Status.OK and r.metadata["truncated"]
    assert len(r.text) < limit + 100 and "characters truncated" in r.text
    assert r.text.endswith("end")  # the tail is kept
    r = call(arena, "import os\nchunk = b'y' * 2**20\nfor _ in range(1024):\n    os.write(1, chunk)")
    assert r.status == Status.ERROR and "File too large" in r.text  # fd-level: RLIMIT_FSIZE
    assert len(r.text) < 3 * limit


def test_kill_parent(arena):
    r = call(arena, "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('survived')")
    # getppid() is 0 in the session's pid namespace, and kill(0) hits only the session itself
    assert r.status in (Status.KILLED, Status.OK)
    assert os.getppid() > 0  # the host is untouched (the fixture checks the fork server)


def test_leave_background_process(arena):
    s = open_session(arena)
    mark = marker()
    try:
        assert call(arena, background_sleep_code(mark), s).text == "started"
        assert wait_present(mark)
    finally:
        close_session(arena, s)
    assert wait_gone(mark) == []


CTYPES_PRELUDE = ("import ctypes, os, signal\n"
                  "libc = ctypes.CDLL(None, use_errno=True)\n")


def test_ctypes_raise_limits_and_regain_privileges(arena):
    code = CTYPES_PRELUDE + (
        "class RLim(ctypes.Structure):\n"
        "    _fields_ = [('cur', ctypes.c_ulong), ('max', ctypes.c_ulong)]\n"
        "inf = RLim(2**64 - 1, 2**64 - 1)\n"
        "print('setrlimit', libc.setrlimit(9, ctypes.byref(inf)))\n"    # RLIMIT_AS
        "print('unshare', libc.unshare(0x10000000 | 0x20000))\n"         # NEWUSER|NEWNS
        "print('mount', libc.mount(b'none', b'/usr', b'tmpfs', 0, None))\n"
        "print('umount', libc.umount2(b'/proc', 2))\n"
        "print('setuid', libc.setuid(0))\n"
        f"print('ptrace', libc.ptrace(16, {os.getpid()}, None, None))\n"  # PTRACE_ATTACH
        "x = bytearray(4 * 2**30)\n")
    r = call(arena, code)
    for name in ("setrlimit", "unshare", "mount", "umount", "ptrace"):
        assert f"{name} -1" in r.text, r.text
    assert "MemoryError" in r.text  # the limit still holds


def test_ctypes_raw_connect(arena):
    code = CTYPES_PRELUDE + (
        "import socket, struct\n"
        "fd = libc.socket(2, 1, 0)\n"
        "addr = struct.pack('!HH4s8x', 2, 443, socket.inet_aton('1.1.1.1'))\n"
        "addr = struct.pack('H', 2) + addr[2:]\n"
        "print('connect', libc.connect(fd, addr, len(addr)), ctypes.get_errno())\n")
    r = call(arena, code)
    assert "connect -1" in r.text


def test_ctypes_kill_everything(arena):
    with session_of(arena) as s:
        r = call(arena, CTYPES_PRELUDE + "libc.kill(-1, 9)\nos.kill(1, 9)\nprint('alive')", s)
        assert r.status in (Status.KILLED, Status.OK)  # at most the session itself


def test_ctypes_segfault(arena):
    with session_of(arena) as s:
        call(arena, "v = 1", s)
        r = call(arena, "import ctypes\nctypes.string_at(0)", s)
        assert r.status == Status.KILLED and "SIGSEGV" in r.text and r.metadata["restarted"]
        assert "NameError" in call(arena, "v", s).text  # a fresh interpreter took over
