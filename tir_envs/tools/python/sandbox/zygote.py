"""The fork server: one process that imported the scientific stack once and forks sessions.

Started by the host (inside bubblewrap when available) with a JSON config as ``argv[1]`` and a
``SOCK_SEQPACKET`` control socket.  It never runs user code.  For each ``spawn`` request it
receives the session's socket over ``SCM_RIGHTS`` and forks two processes:

* **A, the keeper**, stays in the fork server's pid namespace.  It enters a fresh user, mount,
  pid, network, IPC and UTS namespace (isolation ``bwrap``/``unshare``), forks B, waits for it
  and relays its exit status.  SIGTERM to A kills B; SIGINT to A interrupts B's running cell.
* **B, the interpreter**, is pid 1 of the new pid namespace: when it dies the kernel kills every
  process the session started.  It mounts its private ``/proc`` and ``/tmp``, drops every
  capability, and serves cells on its socket.

Without namespaces (isolation ``rlimits``) A is a child subreaper that kills whatever B left
behind, and B works in a private temporary directory.

Control messages (JSON, one per packet).  Host → zygote: ``spawn`` {sid} + fd, ``signal``
{sid, sig: INT|TERM|KILL}, ``exit``.  Zygote → host: ``ready`` {info}, ``spawned`` {sid},
``spawn_failed`` {sid, error}, ``exited`` {sid, code, signal, keeper_signal}.
"""

from __future__ import annotations

import base64
import gc
import importlib
import json
import os
import selectors
import shutil
import signal
import socket
import sys
import tempfile
import time

from . import interpreter, jail, protocol, reseed
from .fresh_cell import FreshCells

TERM_GRACE_S = 2.0
NPROC_PROBE = """
import os, resource
resource.setrlimit(resource.RLIMIT_NPROC, (1, 1))
try:
    pid = os.fork()
except OSError:
    print("enforced")
else:
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    print("not enforced")
"""


def _children(pid: int) -> list[int]:
    """Live children of ``pid`` (``/proc/<pid>/task/*/children``, else a ``/proc`` scan)."""
    kids: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += [int(x) for x in f.read().split()]
        return kids
    except (OSError, ValueError):
        pass
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        kids.append(int(name))
            except (OSError, ValueError, IndexError):
                continue
    return kids


def _reap_all() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _kill_descendants(me: int, rounds: int = 50) -> None:
    """SIGKILL every child of ``me`` until none is left (orphans keep arriving as they are
    re-parented to a subreaper, so loop)."""
    for _ in range(rounds):
        _reap_all()
        kids = _children(me)
        if not kids:
            return
        for k in kids:
            try:
                os.kill(k, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.005)


def _wait_for_exit(pid: int) -> None:
    """Block until ``pid`` exits, on a pidfd when the kernel has them: unlike ``waitpid``,
    it does not wake up each time the host stops or continues the session."""
    import select
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return
    try:
        while not select.select([fd], [], [])[0]:
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


class _CellJail:
    """How a session's interpreter locks itself down once its setup arrives, and, when it is
    a stateless template, how its forked cells are locked down and what a cell left is
    removed.  The template itself never runs code of the model.

    A template is never dumpable.  With namespaces it clones each cell into namespaces of
    its own (``fresh_cell.FreshCells``: a new ``/tmp``, ``/dev/shm``, ``/proc``, devpts, pid
    and IPC namespace per call, then the cell's lock-down), so there is nothing to clean but
    processes, which die with the cell's pid namespace.  It keeps its capabilities (inside
    the session's user namespace only) for those clones.

    Where the kernel refuses those namespaces (the host is warned), or without namespaces
    (``rlimits``), cells share the template's files and are cleaned after each call: the
    template *seals* itself at setup when it can (the syscall filter, no capabilities, each
    cell inheriting the lock-down; its System V IPC objects removed after each cell), else
    each cell locks itself down (a new IPC namespace, no capabilities, a fresh keyring)."""

    def __init__(self, zygote: "Zygote", namespaced: bool, workdir: str, info: dict):
        self.zygote = zygote
        self.namespaced = namespaced
        self.workdir = workdir
        self.proc, self.ptys = info.get("proc", True), info.get("ptys", False)
        self.workdir_mode = os.stat(workdir).st_mode & 0o7777
        self.keep = {p.split("/")[2] for p in zygote.cfg.get("tmp_binds", []) if namespaced
                     and p.startswith("/tmp/")}  # read-only binds of the allow-list
        self.fresh = False
        self.sealed = False
        self.cells: FreshCells | None = None
        self.reseed = reseed.reseed

    def _seccomp(self) -> bool:
        if not self.zygote.seccomp:
            return False
        try:
            jail.load_seccomp(self.zygote.seccomp)
            return True
        except OSError:  # a kernel without seccomp filters: the host warns
            return False

    def prepare(self, fresh: bool) -> dict:
        """At setup: a stateful session locks down now; a template prepares its cells'
        namespaces, else seals itself if it can, else leaves the lock-down to each cell."""
        self.fresh = fresh
        if fresh:
            self.reseed = reseed.CellReseeder()
            jail.set_dumpable(False)  # its cells (same uid) cannot reach it through /proc
            if self.namespaced:
                jail.empty_bounding_set()  # once, for every cell (the template never execs)
                why = self._fresh_cells()
                if why is None:
                    return {"seccomp": bool(self.zygote.seccomp), "sealed": False,
                            "fresh_cells": True}
            else:
                jail.set_child_subreaper()  # orphans of a cell come back here to be killed
                why = None
            self.sealed = self._seal()
            info = {"seccomp": bool(self.zygote.seccomp), "sealed": self.sealed}
            if why is not None:  # the host warns: see docs/sandbox.md
                info.update(fresh_cells=False, fresh_cells_error=why[:300])
            return info
        if self.namespaced:
            jail.drop_capabilities()
        return {"seccomp": self._seccomp()}

    def _fresh_cells(self) -> str | None:
        """Namespaces of their own for this template's cells, if the kernel allows them."""
        cfg = self.zygote.cfg
        if cfg.get("fresh_cells") is False:
            return "turned off in the fork server's configuration"
        try:
            cells = FreshCells(cfg.get("disk_mb", 64), cfg.get("tmp_binds", []),
                               cfg.get("tmp_stash", ""), self.zygote.seccomp, self.proc,
                               self.ptys)
        except OSError as e:
            return str(e)
        why = cells.probe()
        if why is None:
            self.cells = cells
        return why

    def _seal(self) -> bool:
        """Lock the template down for all its cells (see the class docstring)."""
        if self.namespaced and jail.remove_sysv_ipc() is None:
            return False  # no /proc/sysvipc: each cell needs an IPC namespace of its own
        if not self._seccomp():
            return False
        if self.namespaced:
            jail.drop_capabilities(bounding=False)
        return True

    def arm(self) -> None:
        """In the template, right before a cell's fork: the random state the cell inherits
        is fresh (reseeding here, where those pages are the template's own, spares the cell
        the copy-on-write faults of numpy's and sympy's generators; ``reseed.CellReseeder``
        spares the template numpy's ``seed()``)."""
        self.reseed()

    def fork(self) -> int:
        """A cell: cloned into its own namespaces where it can be, else a plain fork."""
        if self.cells is not None:
            return self.cells.fork()
        return jail.bare_fork()

    def lock_down(self) -> None:
        """In a stateless cell's child, before its code: its own stdout and stderr files
        (the template's are not shared with it), and, unless its namespaces or the sealed
        template did it, its lock-down (own IPC namespace, no capabilities, the filter)."""
        for fd, name in ((1, "stdout"), (2, "stderr")):
            mem = os.memfd_create(name)
            os.dup2(mem, fd)
            os.close(mem)
        if self.sealed or self.cells is not None:
            return
        if self.namespaced:
            jail.unshare(jail.CLONE_NEWIPC)
            jail.drop_capabilities(bounding=False)
        if not self._seccomp():
            jail.join_fresh_keyring()

    def clean(self) -> None:
        """After a stateless cell: kill every process it left, then (cells without
        namespaces of their own) empty its files and IPC objects.  Never raises: whatever
        a cell left, the template must serve the next call."""
        try:
            self._clean()
        except Exception:  # noqa: BLE001 - e.g. a tree no walk can handle
            pass

    def _clean(self) -> None:
        if self.cells is not None and not _children_left():
            return  # the usual end: the cell, reaped, was the only child (see below)
        if self.namespaced:
            _signal_others_and_reap()
        else:
            _kill_descendants(os.getpid())
        if self.cells is not None:
            return  # its files and IPC objects died with its namespaces
        try:
            os.chmod(self.workdir, self.workdir_mode)  # a cell may own it and chmod it
        except OSError:
            pass
        _empty_dir(self.workdir, self.keep)
        if self.namespaced and os.path.isdir("/dev/shm"):
            try:
                os.chmod("/dev/shm", 0o1777)
            except OSError:
                pass
            _empty_dir("/dev/shm")
        if self.sealed and self.namespaced:
            jail.remove_sysv_ipc()


def _children_left() -> bool:
    """Whether this process has any child left (running, or exited and now reaped).  As
    init of the session's pid namespace, ``ECHILD`` means the namespace holds no other
    process (an orphan is re-parented to us), which is all the cleaning a template with
    cell namespaces needs to know; it spares ``kill(-1)``, which walks every task on the
    machine."""
    try:
        return os.waitpid(-1, os.WNOHANG) is not None
    except ChildProcessError:
        return False


def _signal_others_and_reap() -> None:
    """As init of the session's pid namespace: SIGKILL every other process and reap them all
    (orphans are re-parented to us before their parent is reaped, so ECHILD means none left)."""
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except OSError:
            return


def _empty_dir(path: str, keep: set[str] = frozenset()) -> None:
    """Remove what a cell left in ``path`` (usually nothing: one ``scandir``)."""
    try:
        entries = [e for e in os.scandir(path) if e.name not in keep]
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                _remove_tree(path, entry.name)
            else:
                os.unlink(entry.path)
        except OSError:
            pass


def _remove_tree(parent: str, name: str) -> None:
    """Remove the folder ``parent/name`` and all below it, however deep (no recursion: a
    nest deeper than the recursion limit or than ``PATH_MAX`` is removed too) and whatever
    its modes (each folder gets ``rwx`` back before it is entered).  One descriptor at a
    time: it descends through names and climbs back through ``..``."""
    top = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    names = [name]
    cur = top
    try:
        os.chmod(name, 0o700, dir_fd=cur)
        cur = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=cur)
        while names:
            sub = None
            with os.scandir(cur) as it:
                for entry in it:
                    if entry.is_dir(follow_symlinks=False):
                        sub = entry.name
                        break
                    try:
                        os.unlink(entry.name, dir_fd=cur)
                    except OSError:
                        pass
            if sub is not None:
                os.chmod(sub, 0o700, dir_fd=cur)
                down = os.open(sub, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=cur)
                os.close(cur)
                cur = down
                names.append(sub)
                continue
            up = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=cur)
            os.close(cur)
            cur = up
            os.rmdir(names.pop(), dir_fd=cur)
    finally:
        if cur != top:
            os.close(cur)
        os.close(top)


class Zygote:
    def __init__(self, config: dict):
        self.cfg = config
        self.mode = config["isolation"]
        self.ctrl = socket.socket(fileno=config["ctrl_fd"])
        self.sessions: dict[int, int] = {}   # keeper pid -> sid
        self.by_sid: dict[int, int] = {}     # sid -> keeper pid
        self.deadlines: dict[int, float] = {}
        self.info: dict = {}
        self.base_vm = 0
        bpf = config.get("seccomp_bpf")
        self.seccomp = base64.b64decode(bpf) if bpf else b""

    # ------------------------------------------------------------------ startup
    def setup(self) -> None:
        """Filesystem jail (``unshare``), privilege drop, self-test (before the slow imports,
        so that an unusable mode fails fast), preloads."""
        cfg = self.cfg
        if self.mode != "bwrap" and cfg.get("parent_pid"):
            jail.set_parent_death_signal(signal.SIGKILL)
            if os.getppid() != cfg["parent_pid"]:
                os._exit(70)
        if self.mode == "unshare":
            self._jail_filesystem()
        if cfg.get("drop_uid") is not None and os.geteuid() == 0:
            jail.drop_to_user(cfg["drop_uid"], cfg["drop_gid"],
                              keep_setuid=bool(cfg.get("session_uids")))
        if self.mode == "unshare" and cfg.get("own_userns"):
            jail.drop_capabilities()
        fresh_keyring = jail.join_fresh_keyring()  # never the host's keys, even without seccomp
        self.info = {"isolation": self.mode, "uid": os.getuid(),
                     "session_uids": bool(cfg.get("session_uids")), **self._self_test(),
                     "fork_server_keyring": fresh_keyring}
        missing = []
        for name in cfg.get("preload", []):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - a missing optional module is not fatal
                missing.append(name)
        self._reseed()  # once here: numpy's first seeding initialises OpenSSL (~30 ms), which
        # every session (and every stateless cell) would otherwise pay again after its fork
        self.base_vm = jail.vm_size_bytes()
        self.info.update(missing_preloads=missing, python=sys.version.split()[0])
        gc.collect()
        gc.freeze()  # keep the collector off inherited objects: fewer copy-on-write pages
        self.info["huge_pages_mb"] = jail.collapse_huge_pages() >> 20

    def _jail_filesystem(self) -> None:
        flags = jail.CLONE_NEWNS | jail.CLONE_NEWNET | jail.CLONE_NEWIPC
        if os.geteuid() == 0:
            jail.unshare(flags)
        else:
            jail.enter_user_namespace(flags)
            self.cfg["own_userns"] = True
        jail.build_root(self.cfg["new_root"], self.cfg["binds"], self.cfg["devices"],
                        self.cfg.get("tmp_binds", []), self.cfg.get("tmp_stash", ""))

    def _self_test(self) -> dict:
        """Start one session and wait for it to report ready (proves the isolation works),
        then check that the kernel enforces ``RLIMIT_NPROC`` for it (it does not for uid 0)."""
        host, child = socket.socketpair()
        pid = self._fork_session(child.detach(), sid=-1, uid=self.cfg.get("self_test_uid"))
        host.settimeout(self.cfg.get("ready_timeout_s", 30))
        enforced = False
        try:
            hello = protocol.recv(host)
            if hello and hello.get("op") == protocol.Op.READY:
                protocol.send(host, {"op": protocol.Op.SETUP, "limits": {}})
                setup = protocol.recv(host)
                hello["seccomp"] = bool(setup and setup.get("seccomp"))
                protocol.send(host, {"op": protocol.Op.RUN, "code": NPROC_PROBE, "max_chars": 100,
                                     "nonce": 1})
                body = protocol.recv_body(host, protocol.result_frame_cap(100))
                reply = protocol.decode_result(body or b"", protocol.field_cap(100))
                enforced = reply["stdout"].strip() == "enforced"
        except (OSError, protocol.ProtocolError) as e:
            hello = {"error": f"{type(e).__name__}: {e}"}
        host.close()
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
        _, status = os.waitpid(pid, 0)
        if not hello or hello.get("op") != protocol.Op.READY:
            code = os.waitstatus_to_exitcode(status)
            raise RuntimeError(f"sandbox self-test failed (keeper exit {code}): {hello}")
        return {"proc": hello.get("proc", True), "userns_locked": hello.get("userns_locked"),
                "seccomp": hello.get("seccomp", False), "keyring": hello.get("keyring"),
                "nproc_enforced": enforced}

    # ------------------------------------------------------------------ sessions
    def _fork_session(self, sock_fd: int, sid: int, cgroup_fds: list[int] = (),
                      uid: int | None = None) -> int:
        zygote_pid = os.getpid()
        self.fork_started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            try:
                self._keeper(sock_fd, zygote_pid, cgroup_fds, uid)
            finally:
                os._exit(101)
        for fd in (sock_fd, *cgroup_fds):
            os.close(fd)
        return pid

    def _keeper(self, sock_fd: int, zygote_pid: int, cgroup_fds: list[int] = (),
                uid: int | None = None) -> None:
        """Process A (see the module docstring).  Never returns."""
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        jail.set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != zygote_pid:
            os._exit(102)
        os.setsid()
        try:
            for fd in cgroup_fds:  # the session's cgroups (the host opened cgroup.procs)
                os.write(fd, b"0")
                os.close(fd)
        except OSError:
            os._exit(106)
        jail.set_oom_score_adj(1000)
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.dup2(sock_fd, 3)
        os.closerange(4, 1 << 16)
        namespaced = self.mode != "rlimits"
        workdir = None
        if namespaced:
            if uid is not None and self.cfg.get("session_uids"):
                try:
                    jail.become_session_user(int(uid))  # the session's own host uid
                except OSError:
                    os._exit(107)
            jail.enter_user_namespace(jail.SESSION_NAMESPACES)
        else:
            jail.set_child_subreaper()
            workdir = tempfile.mkdtemp(prefix="tir-sandbox-")
        alive_r, alive_w = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(alive_w)
            self._interpreter(alive_r, workdir)
        os.close(alive_r)
        os.close(3)

        def on_term(signum, frame):
            try:
                os.kill(child, signal.SIGKILL)
                if not namespaced:
                    os.killpg(child, signal.SIGKILL)
            except OSError:
                pass

        def on_int(signum, frame):
            try:
                os.kill(child, signal.SIGINT)
            except OSError:
                pass

        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, on_int)
        _wait_for_exit(child)
        _, status = os.waitpid(child, 0)
        if not namespaced:
            try:
                os.killpg(child, signal.SIGKILL)
            except OSError:
                pass
            _kill_descendants(os.getpid())
            try:
                _remove_tree(os.path.dirname(workdir), os.path.basename(workdir))
            except OSError:
                shutil.rmtree(workdir, ignore_errors=True)
        if os.WIFSIGNALED(status):
            os._exit(128 + os.WTERMSIG(status))
        os._exit(min(os.WEXITSTATUS(status), 127))

    def _interpreter(self, alive_r: int, workdir: str | None) -> None:
        """Process B (see the module docstring).  Never returns."""
        try:
            jail.set_parent_death_signal(signal.SIGKILL)
            import select
            if select.select([alive_r], [], [], 0)[0]:  # keeper already gone
                os._exit(103)
            os.close(alive_r)
            os.setsid()
            info: dict = {}
            namespaced = workdir is None
            if namespaced:
                info.update(jail.mount_session_fs(self.cfg.get("disk_mb", 64),
                                                  self.cfg.get("tmp_binds", []),
                                                  self.cfg.get("tmp_stash", "")))
                workdir = "/tmp"
                info["userns_locked"] = jail.restrict_user_namespaces()
            else:
                jail.prctl(jail.PR_SET_NO_NEW_PRIVS, 1)
            info["keyring"] = jail.join_fresh_keyring()
            os.chdir(workdir)
            os.environ.update(HOME=workdir, TMPDIR=workdir, PWD=workdir)
            for fd, name in ((1, "stdout"), (2, "stderr")):
                mem = os.memfd_create(name)
                os.dup2(mem, fd)
                os.close(mem)
            self._reseed()
            info["spawn_ms"] = round(1000 * (time.monotonic() - self.fork_started), 3)
            sock = socket.socket(fileno=3)
            cell = _CellJail(self, namespaced, workdir, info)
            interpreter.serve(sock, {"base_vm": self.base_vm, "info": info,
                                     "prepare": cell.prepare, "arm": cell.arm, "fork": cell.fork,
                                     "lock_down": cell.lock_down, "clean": cell.clean,
                                     "shared_nproc": self.mode == "rlimits",
                                     "stop_others": bool(self.cfg.get("stop_others"))
                                     and self.mode != "rlimits"})
        except BaseException:  # noqa: BLE001 - report nothing, the keeper relays the exit
            os._exit(104)
        os._exit(0)

    @staticmethod
    def _reseed() -> None:
        """Forked children share the fork server's random state: give each its own
        (``reseed.reseed``)."""
        reseed.reseed()

    # ------------------------------------------------------------------ loop
    def send(self, msg: dict) -> None:
        self.ctrl.send(json.dumps(msg).encode())

    def serve(self) -> None:
        sel = selectors.DefaultSelector()
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *a: None)
        sel.register(self.ctrl, selectors.EVENT_READ)
        sel.register(wake_r, selectors.EVENT_READ)
        self.send({"op": protocol.Op.READY, **self.info})
        next_sweep = time.monotonic() + 1.0
        while True:
            timeout = 1.0
            if self.deadlines:
                timeout = max(0.0, min(min(self.deadlines.values()) - time.monotonic(), 1.0))
            for key, _ in sel.select(timeout):
                if key.fileobj is self.ctrl:
                    self._on_control()
                else:
                    try:
                        os.read(wake_r, 4096)
                    except BlockingIOError:
                        pass
            self._reap()
            self._escalate()
            if self.mode == "rlimits" and time.monotonic() >= next_sweep:
                self._sweep_orphans()
                next_sweep = time.monotonic() + 1.0

    def _on_control(self) -> None:
        try:
            data, fds, _, _ = socket.recv_fds(self.ctrl, 1 << 16, 8)
        except (OSError, ValueError):
            data, fds = b"", []
        if not data:
            self._shutdown()
        msg = json.loads(data)
        op = msg.get("op")
        if op == protocol.Op.SPAWN:
            self._spawn(msg["sid"], fds, msg.get("uid"))
        elif op == protocol.Op.SIGNAL:
            for fd in fds:
                os.close(fd)
            self._signal(msg["sid"], msg.get("sig", "TERM"))
        elif op == protocol.Op.EXIT:
            self._shutdown()

    def _spawn(self, sid: int, fds: list[int], uid: int | None = None) -> None:
        """``fds``: the session's socket, then the ``cgroup.procs`` files it must join."""
        if not fds:
            self.send({"op": protocol.Op.SPAWN_FAILED, "sid": sid, "error": "expected a socket"})
            return
        try:
            pid = self._fork_session(fds[0], sid, fds[1:], uid)
        except OSError as e:
            for fd in fds:
                os.close(fd)
            self.send({"op": protocol.Op.SPAWN_FAILED, "sid": sid, "error": str(e)})
            return
        self.sessions[pid] = sid
        self.by_sid[sid] = pid
        self.send({"op": protocol.Op.SPAWNED, "sid": sid})

    def _signal(self, sid: int, sig: str) -> None:
        pid = self.by_sid.get(sid)
        if pid is None:
            return
        signum = {"INT": signal.SIGINT, "TERM": signal.SIGTERM, "KILL": signal.SIGKILL}[sig]
        try:
            os.kill(pid, signum)
        except OSError:
            return
        if signum == signal.SIGTERM:
            self.deadlines.setdefault(pid, time.monotonic() + TERM_GRACE_S)

    def _escalate(self) -> None:
        now = time.monotonic()
        for pid, deadline in list(self.deadlines.items()):
            if now >= deadline:
                del self.deadlines[pid]
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.deadlines.pop(pid, None)
            sid = self.sessions.pop(pid, None)
            if sid is None:
                continue
            self.by_sid.pop(sid, None)
            msg = {"op": protocol.Op.EXITED, "sid": sid, "code": None, "signal": None,
                   "keeper_signal": None}
            if os.WIFSIGNALED(status):
                msg["keeper_signal"] = os.WTERMSIG(status)
            else:
                code = os.WEXITSTATUS(status)
                if code >= 128:
                    msg["signal"] = code - 128
                else:
                    msg["code"] = code
            self.send(msg)

    def _sweep_orphans(self) -> None:
        """Without pid namespaces, orphans re-parent to us (a subreaper): kill them."""
        for pid in _children(os.getpid()):
            if pid not in self.sessions:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass

    def _shutdown(self) -> None:
        for pid in list(self.sessions):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        os._exit(0)


def main() -> None:
    # The dynamic linker bound every symbol of the libraries loaded at start (libpython, libc)
    # when it read LD_BIND_NOW; so a stateless cell never resolves one lazily (~0.1 ms of
    # symbol look-ups and a copied GOT page per call).  The code run here does not inherit it.
    os.environ.pop("LD_BIND_NOW", None)
    # A host may start us with signals blocked or ignored (Ray workers do): both would be
    # inherited by every session and defeat the interrupt on timeout.
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    config = json.loads(sys.argv[1])
    zygote = Zygote(config)
    if config["isolation"] == "rlimits":
        jail.set_child_subreaper()
    try:
        zygote.setup()
    except BaseException as e:  # noqa: BLE001 - report why, then stop
        try:
            zygote.send({"op": protocol.Op.FAILED, "error": f"{type(e).__name__}: {e}"})
        finally:
            os._exit(1)
    zygote.serve()


if __name__ == "__main__":
    main()
