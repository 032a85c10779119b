"""Each isolation property of the local sandbox, measured by a test (docs/sandbox.md).

Namespace properties run under both namespace modes (``bwrap`` and ``unshare``; a mode this
machine cannot provide is skipped with the reason).  Process cleanup also runs under
``rlimits``, which promises it too.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

from tests.sandbox_helpers import (backend_or_skip, background_sleep_code, call, close_session,
                                   host_names_in_tmp, marker, NAMESPACE_MODES, open_session,
                                   require_nproc_enforced, session_of, wait_gone, wait_present)
from tir_envs.tools.base import Status
from tir_envs.tools.python import Limits, PythonTool
from tir_envs.tools.python.pool.launcher import sandbox_env

REPO = Path(__file__).resolve().parents[1]
NS = pytest.mark.parametrize("mode", NAMESPACE_MODES)
ALL = pytest.mark.parametrize("mode", (*NAMESPACE_MODES, "rlimits"))


def tool(mode: str, **limits) -> PythonTool:
    return PythonTool(backend=backend_or_skip(mode), limits=Limits(**limits) if limits else None)


@NS
def test_private_working_directory(mode):
    t = tool(mode)
    a, b = open_session(t), open_session(t)
    try:
        r = call(t, "import os\nopen('secret.txt', 'w').write('A')\nprint(os.getcwd())", a)
        assert r.status == Status.OK and r.text == "/tmp"
        r = call(t, "import os\nprint(os.getcwd(), sorted(os.listdir('.')), os.getpid())", b)
        # a fresh tmpfs (holding only the mount points of a Python installed under /tmp, if
        # that is where this one lives) and its own pid namespace
        assert r.text == f"/tmp {host_names_in_tmp()} 1"
        assert call(t, "open('secret.txt').read()", a).text == "'A'"
        assert not os.path.exists("/tmp/secret.txt")  # it never touched the host's disk
    finally:
        close_session(t, a)
        close_session(t, b)


@NS
def test_no_network(mode):
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0)
    port = listener.getsockname()[1]
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    name = f"\0tir-sandbox-test-{os.getpid()}"
    abstract.bind(name)
    abstract.listen()
    code = f"""
import socket
def attempt(label, fn):
    try:
        fn()
        print(label, 'CONNECTED')
    except OSError as e:
        print(label, 'blocked', type(e).__name__)
attempt('tcp-host', lambda: socket.create_connection(('127.0.0.1', {port}), timeout=2))
attempt('tcp-internet', lambda: socket.create_connection(('1.1.1.1', 53), timeout=2))
attempt('udp-dns', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('8.8.8.8', 53)))
u = socket.socket(socket.AF_UNIX)
attempt('unix-abstract', lambda: u.connect({name!r}))
print('interfaces', [n for _, n in socket.if_nameindex()])
"""
    try:
        r = call(tool(mode), code)
        assert r.status == Status.OK, r.text
        assert "CONNECTED" not in r.text
        assert r.text.count("blocked") == 4
        assert "interfaces ['lo']" in r.text
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
        abstract.close()


@NS
def test_memory_limit(mode):
    t = tool(mode, memory_mb=256)
    with session_of(t) as s:
        r = call(t, "x = 1\nbig = bytearray(1024 * 2**20)", s)
        assert r.status == Status.KILLED and "MemoryError" in r.text
        r = call(t, "small = bytearray(64 * 2**20)\nlen(small) + x", s)  # under the limit; state kept
        assert r.status == Status.OK and r.text == str(64 * 2**20 + 1)


@NS
def test_cpu_limit(mode):
    t = tool(mode, cpu_s=1, timeout_s=120)  # generous: 1 CPU second on a loaded machine
    with session_of(t) as s:
        r = call(t, "while True:\n    pass", s)
        assert r.status == Status.KILLED and "CPULimitExceeded" in r.text
        r = call(t, f"import subprocess, time\n"
                    f"p = subprocess.Popen([{sys.executable!r}, '-c', 'while True: pass'])\n"
                    "for _ in range(1200):\n"
                    "    if p.poll() is not None: break\n"
                    "    time.sleep(0.1)\n"
                    "print(p.returncode)", s)
        assert r.status == Status.OK and r.text in ("-9", "-24")  # SIGKILL / SIGXCPU


@NS
def test_process_limit(mode):
    code = ("import os, time\nn = 0\n"
            "for _ in range(40):\n"
            "    try:\n"
            "        pid = os.fork()\n"
            "    except OSError:\n"
            "        break\n"
            "    if pid == 0:\n"
            "        time.sleep(60)\n"
            "        os._exit(0)\n"
            "    n += 1\n"
            "print(n)")
    t = tool(mode, nproc=8)
    require_nproc_enforced(t.backend)
    r = call(t, code)
    assert r.status == Status.OK
    assert 1 <= int(r.text) < 8


@NS
def test_open_files_limit(mode):
    code = ("files = []\n"
            "try:\n"
            "    for i in range(100):\n"
            "        files.append(open(f'f{i}', 'w'))\n"
            "except OSError as e:\n"
            "    print(len(files), e.errno)")
    r = call(tool(mode, nofile=32), code)
    count, errno_ = map(int, r.text.split())
    assert count < 32 and errno_ == 24  # EMFILE


@NS
def test_file_size_limit(mode):
    code = ("import os\n"
            "try:\n"
            "    with open('big', 'wb') as f:\n"
            "        f.write(b'x' * (3 * 2**20))\n"
            "except OSError as e:\n"
            "    print('refused', e.errno)\n"
            "print(os.path.getsize('big') <= 2**20)")
    r = call(tool(mode, fsize_mb=1), code)
    assert r.text == "refused 27\nTrue"  # EFBIG


@NS
def test_private_tmp_is_size_limited(mode):
    code = ("n = 0\n"
            "try:\n"
            "    for i in range(200):\n"
            "        with open(f'chunk{i}', 'wb') as f:\n"
            "            f.write(b'x' * 2**20)\n"
            "        n += 1\n"
            "except OSError as e:\n"
            "    print(n, e.errno)")
    r = call(tool(mode), code)
    n, errno_ = map(int, r.text.split())
    assert n <= 64 and errno_ == 28  # ENOSPC at the pool's disk_mb=64


@NS
def test_wall_clock_timeout(mode):
    t = tool(mode, timeout_s=1)
    with session_of(t) as s:
        call(t, "x = 7", s)
        r = call(t, "import time\ntime.sleep(30)", s)  # interruptible: state survives
        assert r.status == Status.TIMEOUT and "TimeoutError" in r.text
        assert not r.metadata["restarted"]
        assert call(t, "x", s).text == "7"
        r = call(t, "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                    "while True:\n    time.sleep(0.01)", s)  # deaf to interrupts: hard kill
        assert r.status == Status.TIMEOUT and r.metadata["restarted"]
        r = call(t, "x", s)
        assert r.status == Status.ERROR and "NameError" in r.text  # a fresh interpreter


@NS
def test_no_access_to_parent(mode):
    code = f"""
import os, sys
print('ppid', os.getppid())
try:
    os.kill({os.getpid()}, 0)
    print('host pid visible')
except ProcessLookupError:
    print('host pid invisible')
print('proc', os.path.exists('/proc/{os.getpid()}/environ'))
print('repo', os.path.exists({str(REPO / 'pyproject.toml')!r}), os.path.exists({str(REPO / 'tir_envs')!r}))
print('etc', os.path.exists('/etc/passwd'), os.path.exists('/home'))
try:
    import tir_envs
    print('import tir_envs: yes')
except ImportError:
    print('import tir_envs: no')
print('env', sorted(os.environ))
"""
    r = call(tool(mode), code)
    lines = r.text.splitlines()
    assert lines[:6] == ["ppid 0", "host pid invisible", "proc False", "repo False False",
                         "etc False False", "import tir_envs: no"]
    env = set(eval(lines[6][4:]))  # noqa: S307 - our own printed list
    assert env <= set(sandbox_env()) | {"PWD"}


@ALL
@pytest.mark.parametrize("how", ["close", "crash", "timeout"])
def test_every_process_gone(mode, how):
    t = tool(mode, timeout_s=2)
    s = open_session(t)
    mark = marker()
    try:
        r = call(t, background_sleep_code(mark), s)
        assert r.text == "started", r.text
        assert wait_present(mark), "the background process never appeared"
        if how == "crash":
            r = call(t, "import os\nos._exit(1)", s)
            assert r.status == Status.KILLED
        elif how == "timeout":
            r = call(t, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                        "while True:\n    pass", s)
            assert r.status == Status.TIMEOUT and r.metadata["restarted"]
    finally:
        close_session(t, s)
    assert wait_gone(mark) == []


def test_rlimits_mode_private_directory_removed():
    t = tool("rlimits")
    s = open_session(t)
    cwd = call(t, "import os\nopen('f', 'w').write('x')\nprint(os.getcwd())", s).text
    assert os.path.basename(cwd).startswith("tir-sandbox-") and os.path.isdir(cwd)
    assert oct(os.stat(cwd).st_mode & 0o777) == "0o700"
    close_session(t, s)
    assert not os.path.exists(cwd)
