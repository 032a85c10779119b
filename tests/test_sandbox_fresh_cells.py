"""Issue 29, items 1, 2 (ptys) and 6 (a template never dies of what a cell left).

The property of a stateless call: every place a cell can write is new for the call, so
whatever a first call writes, anywhere it can write (files, folders, symlinks, modes down to
``chmod 0``, extended attributes, times, ``/dev/shm``, the top folder of a read-only bind
under ``/tmp``, System V IPC objects and counters, pid numbers, ptys, its output files),
a second call on the same template observes exactly what a call before it observed.  Also
the import hijack through a bind's top folder, and what ``/proc/1`` shows a cell."""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile

import pytest

from tests.sandbox_helpers import (NAMESPACE_MODES, backend_or_skip, call, close_session,
                                   host_binds_in_tmp, host_names_in_tmp, open_session)
from tir_envs.tools.base import Status
from tests.test_sandbox_stateless import CELL_CPU_LIMIT, _no_state_survives
from tir_envs.tools.python import LocalBackend, PythonTool
from tir_envs.tools.python.pool import launcher

# What a cell sees, as JSON.  Times are "now" when they lie in this call (a fresh mount's),
# else their exact value (a bound host path's, or one a cell set).
OBSERVE = r'''
import ctypes, json, os, time
t0 = time.time()
TOP, BIND = TOP_PATH, BIND_PATH
SKIP = set(SKIP_PATHS)  # the host's own read-only binds under /tmp (a checkout or venv there)
def when(t, path):
    if path and path.startswith(BIND):  # a read-only host folder: its times as they are
        return t
    return "now" if t0 - 30 <= t <= time.time() + 1 else t
def describe(path, fd=None):
    try:
        s = os.fstat(fd) if fd is not None else os.stat(path, follow_symlinks=False)
    except OSError as e:
        return type(e).__name__
    try:
        xattrs = sorted(os.listxattr(fd if fd is not None else path,
                                     **({} if fd is not None else {"follow_symlinks": False})))
    except OSError as e:
        xattrs = type(e).__name__
    return [oct(s.st_mode), s.st_uid, s.st_size if not os.path.isdir(path or "") else "-",
            xattrs, when(s.st_mtime, path), when(s.st_atime, path), when(s.st_ctime, path)]
def tree(root):
    out = {root: describe(root)}
    for here, dirs, files in os.walk(root, onerror=lambda e: out.setdefault("err", str(e))):
        dirs[:] = [d for d in dirs if os.path.join(here, d) not in SKIP]
        for name in sorted(dirs + files):
            out[os.path.join(here, name)] = describe(os.path.join(here, name))
    return out
seen = {}
for root in ("/tmp", "/dev/shm", "/dev/pts", TOP, BIND):
    seen.update(tree(root))
seen["fd1"], seen["fd2"] = describe(None, 1), describe(None, 2)
seen["cwd"] = os.getcwd()
seen["pids"] = sorted(p for p in os.listdir("/proc") if p.isdigit())
stat1 = open("/proc/1/stat").read().rsplit(")", 1)[1].split()
seen["proc1_children"] = {"cminflt": stat1[8], "cmajflt": stat1[10], "cutime": stat1[13],
                          "cstime": stat1[14]}
seen["loadavg_last_pid"] = open("/proc/loadavg").read().split()[-1]
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
seen["pid_and_child"] = [os.getpid(), pid]
libc = ctypes.CDLL(None, use_errno=True)
seen["sysvipc"] = {k: open(f"/proc/sysvipc/{k}").read().count("\n") for k in ("shm", "sem", "msg")}
ids = [libc.shmget(0, 4096, 0o1600), libc.semget(0, 1, 0o1600), libc.msgget(0, 0o1600)]
seen["ipc_ids"] = ids
libc.shmctl(ids[0], 0, None); libc.semctl(ids[1], 0, 0); libc.msgctl(ids[2], 0, None)
m, s = os.openpty()
seen["pty"] = os.ttyname(s)
print(json.dumps(seen, sort_keys=True))
'''

# Write everywhere a cell can; report which writes to the bind and its top folder succeeded.
WRITE = r'''
import ctypes, os, time
TOP, BIND = TOP_PATH, BIND_PATH
took = []
def attempt(what, f, *a):
    try:
        f(*a)
        took.append(what)
    except OSError:
        pass
def leave(d):
    attempt(f"file {d}", lambda: open(f"{d}/left", "w").write("secret" * 1000))
    attempt(f"dir {d}", os.makedirs, f"{d}/dir/inner")
    attempt(f"chmod0 {d}/dir", os.chmod, f"{d}/dir", 0)
    attempt(f"symlink {d}", os.symlink, "/etc/passwd", f"{d}/link")
    attempt(f"fill {d}", lambda: open(f"{d}/fill", "wb").write(b"x" * (1 << 20)))
    attempt(f"xattr {d}", os.setxattr, d, "user.leak", b"answer=42" * 100)
    attempt(f"xattr file {d}", os.setxattr, f"{d}/left", "user.leak", b"42")
    attempt(f"utime {d}", os.utime, d, (1e9, 1e9))
    attempt(f"chmod {d}", os.chmod, d, 0o700)
for d in ("/tmp", "/dev/shm", "/dev/pts", TOP, BIND):
    leave(d)
# the import hijack: move the top folder away and put a symlink farm in its place
attempt("rename top", os.rename, TOP, "/tmp/moved")
attempt("rmdir top", os.rmdir, TOP)
attempt("farm", os.makedirs, f"{TOP}/farm")
attempt("hijack", lambda: open(f"{BIND}/hijackme/__init__.py", "w").write("VALUE = 'hijacked'"))
for fd in (1, 2):  # the cell's output files
    attempt(f"fchmod {fd}", os.fchmod, fd, 0o640)
    attempt(f"fxattr {fd}", os.setxattr, fd, "user.leak", b"42")
    attempt(f"futime {fd}", os.utime, fd, (1e9, 1e9))
libc = ctypes.CDLL(None, use_errno=True)
for key in range(0x7100, 0x7140):  # advance the IPC id counters, leave some objects
    libc.shmctl(libc.shmget(0, 4096, 0o1600), 0, None)
libc.shmget(0x7131, 4096, 0o1666); libc.semget(0x7132, 1, 0o1666); libc.msgget(0x7133, 0o1666)
for _ in range(40):  # advance the pid counter, and the children's times in /proc/1/stat
    pid = os.fork()
    if pid == 0:
        sum(range(200000))
        os._exit(0)
    os.waitpid(pid, 0)
ptys = [os.openpty() for _ in range(4)]
if os.fork() == 0:
    time.sleep(60)
for d in ("/tmp", "/dev/shm", "/dev/pts", TOP, BIND):
    attempt(f"chmod0 {d}", os.chmod, d, 0)
print(sorted(w for w in took if TOP in w or BIND in w or w in ("rename top", "rmdir top",
                                                               "farm", "hijack")))
'''

IMPORT = "import sys; sys.path.insert(0, BIND_PATH); import hijackme; print(hijackme.VALUE)"


@pytest.fixture(scope="module")
def bound_dir():
    """A host folder under /tmp bound into the sandbox (as a checkout or venv there is)."""
    top = tempfile.mkdtemp(prefix="tir-fresh-", dir="/tmp")
    site = os.path.join(top, "site")
    os.makedirs(os.path.join(site, "hijackme"))
    with open(os.path.join(site, "hijackme", "__init__.py"), "w") as f:
        f.write("VALUE = 'real'\n")
    for here, dirs, files in os.walk(top):
        os.chmod(here, 0o755)
        for name in files:
            os.chmod(os.path.join(here, name), 0o644)
    yield top, site
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture(params=NAMESPACE_MODES)
def backend(request, bound_dir):
    backend_or_skip(request.param)
    own = LocalBackend(isolation=request.param, spares=1, fork_servers=1,
                       extra_binds=(bound_dir[1],))
    yield own
    own.shutdown()


def _code(code: str, bound_dir) -> str:
    skip = [p for p in host_binds_in_tmp((bound_dir[1],)) if p != bound_dir[1]]
    return (code.replace("TOP_PATH", repr(bound_dir[0])).replace("BIND_PATH", repr(bound_dir[1]))
            .replace("SKIP_PATHS", repr(skip)))


def test_nothing_a_cell_writes_reaches_the_next_call(backend, bound_dir):
    tool = PythonTool(backend=backend, stateful=False)
    before = call(tool, _code(OBSERVE, bound_dir))
    assert before.status == Status.OK, before.text
    fresh = json.loads(before.text)
    assert fresh["pids"] == ["1"] and fresh["pid_and_child"] == [1, 2], fresh
    assert fresh["proc1_children"] == {"cminflt": "0", "cmajflt": "0", "cutime": "0",
                                       "cstime": "0"}, fresh
    spawned = backend.pool.info()["counters"].get("spawned", 0)
    wrote = call(tool, _code(WRITE, bound_dir))
    assert wrote.status == Status.OK, wrote.text
    assert wrote.text == "[]", f"wrote to a bind or its top folder: {wrote.text}"
    for _ in range(2):  # and again after a call that only looked
        after = call(tool, _code(OBSERVE, bound_dir))
        assert after.status == Status.OK, after.text
        seen = json.loads(after.text)
        changed = {k: (fresh.get(k), seen.get(k)) for k in set(fresh) | set(seen)
                   if fresh.get(k) != seen.get(k)}
        assert not changed, changed
    assert call(tool, _code(IMPORT, bound_dir)).text == "real"
    # the same template served every call
    assert backend.pool.info()["counters"].get("spawned", 0) == spawned


def test_a_stateless_call_in_a_sealed_template_is_not_hijacked_by_a_farm(backend, bound_dir):
    """The attack of issue 29 as it was run: a cell rebuilds a bind's top folder as a farm
    of symlinks to the real files but one, then later calls import."""
    tool = PythonTool(backend=backend, stateful=False)
    farm = _code("import os\nTOP, BIND = TOP_PATH, BIND_PATH\n"
                 "try:\n    os.rename(TOP, '/tmp/old')\nexcept OSError as e:\n    print(e.errno)\n"
                 "try:\n    os.makedirs(BIND + '/hijackme', exist_ok=True)\n"
                 "    open(BIND + '/hijackme/__init__.py', 'w').write(\"VALUE = 'farm'\")\n"
                 "except OSError as e:\n    print(e.errno)\n", bound_dir)
    r = call(tool, farm)
    assert r.status == Status.OK and "farm" not in r.text, r.text
    for _ in range(3):
        assert call(tool, _code(IMPORT, bound_dir)).text == "real"


PTYS = """
import os
n = 0
try:
    while n < 5000:
        os.openpty()
        n += 1
except OSError as e:
    print(n, e.errno)
"""


@pytest.mark.parametrize("mode", NAMESPACE_MODES)
def test_a_session_exhausting_its_ptys_leaves_another_its_own(mode):
    """Issue 29 item 2: each session has a devpts instance of its own, of at most 16 ptys."""
    tool = PythonTool(backend=backend_or_skip(mode))
    greedy, bystander = open_session(tool), open_session(tool)
    try:
        r = call(tool, PTYS, greedy)
        n, _ = r.text.split()
        assert 1 <= int(n) <= 16, r.text
        r = call(tool, "import os; m, s = os.openpty(); print(os.ttyname(s))", bystander)
        assert r.status == Status.OK and r.text == "/dev/pts/0", r.text
        stateless = PythonTool(backend=backend_or_skip(mode), stateful=False)
        assert call(stateless, PTYS).text.split()[0] == n  # a cell's own instance, as large
    finally:
        close_session(tool, greedy)
        close_session(tool, bystander)


LEAVE_TREES = """
import os
os.makedirs('ro/a/b')
for name in ('ro/a/b/f', 'ro/a/g', 'ro/h'):
    open(name, 'w').write('x')
for d in ('ro/a/b', 'ro/a', 'ro'):
    os.chmod(d, 0o555)
os.makedirs('locked/inner')
os.chmod('locked', 0)
here = os.open('.', os.O_RDONLY)
for name in ('d', 'nest' + 'x' * 40):  # deeper than the recursion limit; longer than PATH_MAX
    for _ in range(1500):
        os.mkdir(name)
        os.chdir(name)
    open('bottom', 'w').write('deep')
    os.fchdir(here)
print('left')
"""


@pytest.mark.parametrize("mode", (*NAMESPACE_MODES, "rlimits"))
def test_a_template_survives_read_only_trees_and_deep_nests(mode):
    """Issue 29 item 6: the template used to die (exit 104) cleaning these up."""
    backend_or_skip(mode)
    own = LocalBackend(isolation=mode, spares=1, fork_servers=1)
    try:
        # (without namespaces the folders are on the host's disk, where removing 3,000 nested
        # folders took 10-13 s here, as long as `rm -rf`: within the call's time)
        tool = PythonTool(backend=own, stateful=False, timeout_s=90)
        call(tool, "1")
        spawned = own.pool.info()["counters"].get("spawned", 0)
        for _ in range(2):
            r = call(tool, LEAVE_TREES)
            assert r.status == Status.OK and r.text == "left", r.text
            r = call(tool, "import os; print(sorted(os.listdir('.')))")
            left = [] if mode == "rlimits" else host_names_in_tmp()  # a cell cwd: its /tmp
            assert r.status == Status.OK and r.text == str(left), r.text
            assert not r.metadata.get("restarted"), r.metadata
        assert own.pool.info()["counters"].get("spawned", 0) == spawned  # the same template
    finally:
        own.shutdown()


@pytest.mark.parametrize("mode", NAMESPACE_MODES)
def test_where_cells_cannot_have_namespaces_the_host_warns_and_cells_are_cleaned(
        mode, monkeypatch, caplog):
    """The fallback (a kernel refusing the cell's namespaces, forced here through the fork
    server's configuration): the host warns, and the cleaning of issue 21 still empties
    files, modes, IPC objects and processes between calls."""
    backend_or_skip(mode)
    original = launcher.launch_spec

    def without_fresh_cells(*args, **kwargs):
        spec = original(*args, **kwargs)
        spec.config["fresh_cells"] = False
        spec.argv[-1] = json.dumps(spec.config)
        return spec

    monkeypatch.setattr(launcher, "launch_spec", without_fresh_cells)
    own = LocalBackend(isolation=mode, spares=1, fork_servers=1)
    try:
        tool = PythonTool(backend=own, stateful=False)
        with caplog.at_level(logging.WARNING, logger="tir_envs.sandbox"):
            r = call(tool, "import os; print(os.getpid() != 1)")
        assert r.text == "True", r.text  # a plain fork: the cell shares its template's pids
        assert "namespaces per stateless call" in caplog.text, caplog.text
        r = call(tool, CELL_CPU_LIMIT)  # set by the cell, as with namespaces of its own
        assert r.text == "(300, 301)", r.text
        _no_state_survives(tool)
        r = call(tool, LEAVE_TREES)
        assert r.status == Status.OK and r.text == "left", r.text
        assert call(tool, "import os; print(sorted(os.listdir('.')))").text == str(
            host_names_in_tmp())
    finally:
        own.shutdown()


def test_a_binds_top_folder_is_read_only_in_a_stateful_session_too(backend, bound_dir):
    tool = PythonTool(backend=backend)
    code = _code("import os\nTOP, BIND = TOP_PATH, BIND_PATH\ntook = []\n"
                 "for name, f in (('chmod', lambda: os.chmod(TOP, 0)),\n"
                 "                ('rename', lambda: os.rename(TOP, '/tmp/elsewhere')),\n"
                 "                ('write', lambda: open(TOP + '/x', 'w').write('x'))):\n"
                 "    try:\n        f()\n        took.append(name)\n    except OSError:\n"
                 "        pass\nprint(took)", bound_dir)
    r = call(tool, code)
    assert r.status == Status.OK and r.text == "[]", r.text
