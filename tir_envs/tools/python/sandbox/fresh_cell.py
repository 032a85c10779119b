"""A stateless cell in namespaces of its own: everything it can write is new for each call.

A stateless template forks one child per call.  Cleaning up after a cell cannot restore all
it changed (modes, extended attributes and times of ``/tmp`` and ``/dev/shm``, the top
folders of binds under ``/tmp``, the template's own ``/proc`` counters, pid and IPC
counters), so nothing is cleaned: each cell is cloned into a new mount, pid and IPC
namespace and, before any code of the model, mounts

* a fresh tmpfs on ``/tmp`` (its working directory), the allow-listed paths under ``/tmp``
  bound back read-only and the top folder of each bound again onto itself read-only (the
  cell owns no folder of a bind: no rename, ``chmod`` or write there),
* a fresh tmpfs on ``/dev/shm``, a fresh ``/proc`` (its own pid namespace: the cell is pid 1
  and sees neither the template nor an earlier cell) and a private ``devpts`` (at most
  ``jail.PTY_MAX`` ptys),

then drops every capability and installs the syscall filter.  All of it dies with the cell's
last process; the template's own mounts, processes and IPC objects are never visible to it.
System V IPC objects and pid numbers start afresh in every call.

Being pid 1 of its namespace, a cell is, like a stateful session's interpreter, immune to
signals it sends itself with their default action (``os.kill(os.getpid(), SIGKILL)`` does
nothing); signals from the kernel (faults, limits, the OOM killer) and the host's interrupt
are delivered as before.  Everything an earlier cell left running is gone when the call ends:
the kernel kills a pid namespace with its init.

The few calls a cell makes before the model's code are prepared in the template (``ctypes``
prototypes and argument buffers built once), so the cell pays the system calls and little
else.  Relies on ``glibc``'s cached thread id staying right across a raw ``clone``: the
template is pid 1 of the session's namespace and the cell pid 1 of its own.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform

from . import jail

SIGCHLD = 17
FLAGS = jail.CLONE_NEWNS | jail.CLONE_NEWPID | jail.CLONE_NEWIPC
_CLONE_NR = {"x86_64": 56, "aarch64": 220, "arm64": 220, "riscv64": 220, "ppc64le": 120}
_NOSUID_NODEV = jail.MS_NOSUID | jail.MS_NODEV
_RO_REMOUNT = jail.MS_REMOUNT | jail.MS_BIND | jail.MS_RDONLY | _NOSUID_NODEV
EXIT_SETUP_FAILED = 105


class FreshCells:
    """Built once in a stateless template (which keeps its capabilities inside the session's
    user namespace: it never runs code of the model); ``fork`` clones each cell."""

    def __init__(self, disk_mb: int, tmp_binds: list[str], tmp_stash: str,
                 seccomp: bytes | None, proc: bool, ptys: bool):
        nr = _CLONE_NR.get(platform.machine())
        if nr is None:
            raise OSError(errno.ENOSYS, f"no clone syscall number known for {platform.machine()}")
        self._nr = nr
        libc = ctypes.PyDLL(None, use_errno=True)  # PyDLL: the GIL stays held across clone
        self._syscall = libc.syscall
        self._syscall.restype = ctypes.c_long
        self._syscall.argtypes = [ctypes.c_long] + [ctypes.c_ulong] * 5
        self._mount = libc.mount
        self._mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
        self._prctl = libc.prctl
        self._prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
        self._capset = libc.capset
        self._cap_header = jail._CapHeader(0x20080522, 0)
        self._cap_data = (jail._CapData * 2)()
        self._cap_args = (ctypes.byref(self._cap_header), self._cap_data)
        self._filter = None
        if seccomp:
            n = len(seccomp) // ctypes.sizeof(jail._SockFilter)
            self._insns = (jail._SockFilter * n).from_buffer_copy(seccomp)
            self._prog = jail._SockFprog(n, ctypes.cast(self._insns,
                                                        ctypes.POINTER(jail._SockFilter)))
            self._filter = ctypes.cast(ctypes.pointer(self._prog), ctypes.c_void_p).value
        self._dirs, self._mounts = self._plan(disk_mb, tmp_binds, tmp_stash, proc, ptys)

    @staticmethod
    def _plan(disk_mb: int, tmp_binds: list[str], tmp_stash: str, proc: bool, ptys: bool):
        """(folders to create, mounts to make) in each cell, as ready bytes."""
        size = max(1, int(disk_mb))
        mounts: list[tuple] = [(b"tmpfs", b"/tmp", b"tmpfs", _NOSUID_NODEV,
                                f"mode=1777,size={size}m,nr_inodes={max(1024, size * 256)}"
                                .encode(), None)]
        dirs = []
        for i, path in enumerate(tmp_binds):  # as jail.mount_session_fs binds them
            dirs.append(path)
            mounts.append((f"{tmp_stash}/{i}".encode(), path.encode(), None,
                           jail.MS_BIND | jail.MS_REC, None, path))
            mounts.append((None, path.encode(), None, _RO_REMOUNT, None, path))
        for top in jail.top_folders(tmp_binds):
            mounts.append((top.encode(), top.encode(), None, jail.MS_BIND | jail.MS_REC,
                           None, top))
            mounts.append((None, top.encode(), None, _RO_REMOUNT, None, top))
        if os.path.isdir("/dev/shm"):
            mounts.append((b"tmpfs", b"/dev/shm", b"tmpfs", _NOSUID_NODEV | jail.MS_NOEXEC,
                           f"mode=1777,size={min(size, 64)}m".encode(), None))
        if proc:
            mounts.append((b"proc", b"/proc", b"proc", _NOSUID_NODEV | jail.MS_NOEXEC, None,
                           None))
        if ptys:
            mounts.append((b"devpts", b"/dev/pts", b"devpts", jail.MS_NOSUID | jail.MS_NOEXEC,
                           jail.DEVPTS_OPTIONS.encode(), None))
        return dirs, mounts

    def fork(self) -> int:
        """Clone a cell (returns its pid here, 0 in the cell, which is set up and locked
        down when this returns there; a cell that cannot be set up exits at once)."""
        pid = self._syscall(self._nr, FLAGS | SIGCHLD, 0, 0, 0, 0)
        if pid < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"clone: {os.strerror(err)}")
        if pid == 0:
            try:
                self._enter()
            except BaseException:  # noqa: BLE001 - never run the model's code half set up
                os._exit(EXIT_SETUP_FAILED)
        return pid

    def _enter(self) -> None:
        mounts = self._mounts
        self._do_mount(mounts[0])
        for path in self._dirs:
            os.makedirs(path, mode=0o755, exist_ok=True)
        for m in mounts[1:]:
            self._do_mount(m)
        os.chdir("/tmp")
        self._lock_down()

    def _do_mount(self, m: tuple) -> None:
        if self._mount(m[0], m[1], m[2], m[3], m[4]) == 0:
            return
        if m[3] == _RO_REMOUNT:  # locked flags (nodev/noexec inherited): keep them
            if self._mount(None, m[1], None, _RO_REMOUNT | jail.MS_NOEXEC, None) == 0:
                return
        err = ctypes.get_errno()
        raise OSError(err, f"mount {m[1].decode()}: {os.strerror(err)}")

    def _lock_down(self) -> None:
        """No capabilities (none regainable), dumpable again (its own processes may read
        each other's ``/proc`` entries), then the syscall filter."""
        prctl = self._prctl
        prctl(jail.PR_CAP_AMBIENT, jail.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
        if self._capset(*self._cap_args) != 0:
            raise OSError(ctypes.get_errno(), "capset")
        if prctl(jail.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "no_new_privs")
        prctl(jail.PR_SET_DUMPABLE, 1, 0, 0, 0)
        if self._filter is not None and prctl(jail.PR_SET_SECCOMP, jail.SECCOMP_MODE_FILTER,
                                              self._filter, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "seccomp")

    def probe(self) -> str | None:
        """Clone one cell that exits at once: None if it could be set up, else why not."""
        try:
            pid = self.fork()
        except OSError as e:
            return str(e)
        if pid == 0:
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            return f"a cell could not set up its namespaces (exit {status:#x})"
        return None
