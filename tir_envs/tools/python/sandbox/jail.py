"""Linux isolation primitives for a sandboxed session: namespaces, mounts, capabilities, limits.

Thin ``ctypes`` wrappers over ``unshare(2)``, ``mount(2)``, ``pivot_root(2)``, ``prctl(2)`` and
``capset(2)``, plus the few recipes built from them:

* ``enter_user_namespace``: a new user namespace (and whichever others are asked for) in which
  the caller is uid/gid 1000 mapped onto its own unprivileged ids.  Needs no privilege.
* ``build_root``: an allow-list filesystem (read-only binds of what Python needs, nothing else)
  made the root with ``pivot_root``, the same view bubblewrap gives the fork server.
* ``mount_session_fs``: inside a session's own pid namespace, a fresh ``/proc`` (or none at all),
  a size-limited private ``/tmp`` (the working directory), ``/dev/shm`` and a private devpts.
* ``drop_capabilities``: no capabilities left, none regainable (bounding set emptied, no new
  privileges, no further user namespaces).
* ``apply_limits``: the per-session resource limits (``cpu_limit``: the CPU one, also set
  by each stateless cell).
* ``load_seccomp``: install the BPF syscall filter the host built (``syscall_filter.py``).
* ``join_fresh_keyring``: a new, empty session keyring (never the host's).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import resource

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
SESSION_NAMESPACES = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_SET_KEEPCAPS = 8
CAP_KILL, CAP_SETGID, CAP_SETUID = 5, 6, 7
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
KEYCTL_JOIN_SESSION_KEYRING = 1
_KEYCTL = {"x86_64": 250, "aarch64": 219, "arm64": 219, "riscv64": 219, "ppc64le": 355,
           "s390x": 280}

_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "arm64": 41, "riscv64": 41, "ppc64le": 203,
               "s390x": 217}
SANDBOX_UID = 1000
_LIBC = None
_PYDLL = None


def _libc():
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def bare_fork() -> int:
    """``fork()`` without CPython's fork bookkeeping, for a process with one Python thread
    at rest (a stateless template between cells).

    ``os.fork`` runs the interpreter's at-fork machinery in the child (thread and lock
    re-initialisation, every ``os.register_at_fork`` hook: ``random``'s reseed, ``threading``,
    ``logging``, ...): about 200 copy-on-write faults, close to 1 ms of CPU, for state that
    is already consistent when the only Python thread forks while holding the GIL (a
    ``PyDLL`` call keeps it).  glibc's own ``pthread_atfork`` handlers still run (malloc,
    OpenBLAS).  The caller reseeds what it needs itself."""
    global _PYDLL
    if _PYDLL is None:
        _PYDLL = ctypes.PyDLL(None, use_errno=True)
        _PYDLL.fork.restype = ctypes.c_int
        _PYDLL.fork.argtypes = []
    return _check(_PYDLL.fork(), "fork")


def _check(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def _b(s: str | None) -> bytes | None:
    return None if s is None else os.fsencode(s)


def unshare(flags: int) -> None:
    _check(_libc().unshare(ctypes.c_int(flags)), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int = 0,
          data: str | None = None) -> None:
    _check(_libc().mount(_b(source), _b(target), _b(fstype), ctypes.c_ulong(flags), _b(data)),
           f"mount {target}")


def umount2(target: str, flags: int = 0) -> None:
    _check(_libc().umount2(_b(target), ctypes.c_int(flags)), f"umount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    nr = _PIVOT_ROOT.get(platform.machine())
    if nr is None:
        raise OSError(errno.ENOSYS, f"pivot_root: unknown syscall number on {platform.machine()}")
    _check(_libc().syscall(ctypes.c_long(nr), _b(new_root), _b(put_old)), "pivot_root")


def prctl(option: int, arg2: int = 0) -> int:
    return _check(_libc().prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(0),
                                ctypes.c_ulong(0), ctypes.c_ulong(0)), f"prctl {option}")


def set_parent_death_signal(sig: int) -> None:
    """Have the kernel send ``sig`` to this process when its parent thread dies."""
    prctl(PR_SET_PDEATHSIG, sig)


def set_child_subreaper() -> None:
    """Orphaned descendants are re-parented to this process (so it can kill them)."""
    prctl(PR_SET_CHILD_SUBREAPER, 1)


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def enter_user_namespace(extra_flags: int = 0, inside_id: int = SANDBOX_UID) -> None:
    """``unshare`` a user namespace (plus ``extra_flags``) and map ``inside_id`` to our ids.

    The caller keeps a full capability set *inside* the new namespace (needed for the mounts
    that follow) until ``drop_capabilities``; outside it has no more power than before.
    """
    uid, gid = os.geteuid(), os.getegid()
    unshare(CLONE_NEWUSER | extra_flags)
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{inside_id} {uid} 1\n")
    _write("/proc/self/gid_map", f"{inside_id} {gid} 1\n")


def drop_to_user(uid: int, gid: int, keep_setuid: bool = False) -> None:
    """From root: become ``uid``/``gid`` for good (no supplementary groups).  With
    ``keep_setuid`` the process keeps ``CAP_SETUID``/``CAP_SETGID`` (so that each session it
    forks can switch to a host uid of its own, ``become_session_user``) and ``CAP_KILL`` (to
    signal those sessions' keepers), and nothing else."""
    os.setgroups([])
    if keep_setuid:
        prctl(PR_SET_KEEPCAPS, 1)
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if keep_setuid:
        prctl(PR_SET_KEEPCAPS, 0)
        _capset((1 << CAP_KILL) | (1 << CAP_SETGID) | (1 << CAP_SETUID))
    prctl(PR_SET_DUMPABLE, 1)  # keep /proc/self/* writable by ourselves (uid_map)


def become_session_user(uid: int) -> None:
    """In a session's keeper, before its user namespace: switch to the session's own host
    uid (and gid), then give up every capability (between non-zero uids the kernel keeps
    them; ``capset`` drops them)."""
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    _capset(0)
    prctl(PR_SET_DUMPABLE, 1)


def make_mounts_private() -> None:
    mount(None, "/", None, MS_REC | MS_PRIVATE)


def _bind(src: str, dst: str, readonly: bool = True) -> None:
    mount(src, dst, None, MS_BIND | MS_REC)
    if readonly:
        try:
            mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        except OSError:  # locked flags (e.g. nodev inherited): keep them and add read-only
            mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
                  | MS_NOEXEC)


def _makedirs(path: str) -> None:
    os.makedirs(path, mode=0o755, exist_ok=True)


def build_root(new_root: str, binds: list[str], devices: list[str],
               tmp_binds: list[str] = (), tmp_stash: str = "") -> None:
    """Make an allow-list filesystem the root: a tmpfs holding read-only binds of ``binds``
    (symlinks copied as symlinks), ``devices`` bound from the host ``/dev``, the host ``/proc``
    (covered later by each session's own) and an empty ``/tmp``.  Everything else vanishes.
    """
    make_mounts_private()
    mount("tmpfs", new_root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m")
    for path in binds:
        target = new_root + path
        if os.path.islink(path) and os.path.dirname(path) == "/":
            os.symlink(os.readlink(path), target)
            continue
        if not os.path.exists(path):
            continue
        if os.path.isdir(path):
            _makedirs(target)
        else:
            _makedirs(os.path.dirname(target))
            open(target, "a").close()
        _bind(path, target)
    for i, path in enumerate(tmp_binds):  # see mount_session_fs
        _makedirs(f"{new_root}{tmp_stash}/{i}")
        _bind(path, f"{new_root}{tmp_stash}/{i}")
    _makedirs(new_root + "/dev")
    for dev in devices:
        target = new_root + dev
        open(target, "a").close()
        mount(dev, target, None, MS_BIND)
    for name, dest in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                       ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2"),
                       ("ptmx", "pts/ptmx")):  # each session mounts its own devpts there
        os.symlink(dest, f"{new_root}/dev/{name}")
    for d in ("/dev/shm", "/dev/pts", "/tmp", "/proc"):
        _makedirs(new_root + d)
    os.chmod(new_root + "/tmp", 0o1777)
    mount("/proc", new_root + "/proc", None, MS_BIND | MS_REC)
    old = new_root + "/.old_root"
    _makedirs(old)
    pivot_root(new_root, old)
    os.chdir("/")
    umount2("/.old_root", MNT_DETACH)
    os.rmdir("/.old_root")
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def mount_session_fs(disk_mb: int, tmp_binds: list[str] = (), tmp_stash: str = "") -> dict:
    """Private filesystems of one session (run as the init of its own pid namespace).

    Allow-listed paths that live under ``/tmp`` (e.g. a virtualenv there) are bound back,
    read-only, from their stash over the fresh ``/tmp``, so the interpreter still finds them
    (and the folders holding them are read-only too).

    ``/proc`` shows only the session's own processes; when the kernel refuses a new proc mount
    (an outer ``/proc`` with masked paths, as in many containers) it is hidden entirely.
    """
    make_mounts_private()
    info = {"proc": True}
    try:
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except OSError:
        mount("tmpfs", "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k")
        info["proc"] = False
    size = max(1, int(disk_mb))
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
          f"mode=1777,size={size}m,nr_inodes={max(1024, size * 256)}")
    for i, path in enumerate(tmp_binds):
        _makedirs(path)
        _bind(f"{tmp_stash}/{i}", path)
    for top in top_folders(tmp_binds):  # folders made above to hold a bind: not the code's
        _bind(top, top)
    if os.path.isdir("/dev/shm"):
        mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              f"mode=1777,size={min(size, 64)}m")
    info["ptys"] = mount_private_ptys()
    return info


PTY_MAX = 16
DEVPTS_OPTIONS = f"newinstance,ptmxmode=0666,mode=0620,max={PTY_MAX}"


def mount_private_ptys() -> bool:
    """A devpts instance of this session's own on ``/dev/pts`` (``/dev/ptmx`` points into
    it), holding at most ``PTY_MAX`` ptys: a session can neither exhaust the host's ptys nor
    share an instance with another.  False where there is no ``/dev/pts`` to mount on or
    the kernel refuses: then ``openpty`` fails in the session (no shared instance is left
    reachable: the mount point is covered by an empty read-only tmpfs)."""
    if not os.path.isdir("/dev/pts"):
        return False
    try:
        mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, DEVPTS_OPTIONS)
        return True
    except OSError:
        try:
            mount("tmpfs", "/dev/pts", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
                  "size=4k")
        except OSError:
            pass
        return False


def top_folders(tmp_binds: list[str]) -> list[str]:
    """``/tmp/<name>`` of every bind below it that is not itself that folder: the folders a
    session creates (and would own) to hold the bind, bound onto themselves read-only so
    that code can neither rename, ``chmod`` nor write them."""
    tops = []
    for path in tmp_binds:
        parts = path.split("/")
        top = f"/tmp/{parts[2]}" if len(parts) > 3 else None
        if top and top not in tops and top not in tmp_binds:
            tops.append(top)
    return tops


def restrict_user_namespaces() -> bool:
    """Forbid new user namespaces below this one (so code cannot regain capabilities)."""
    try:
        _write("/proc/sys/user/max_user_namespaces", "0")
        return True
    except OSError:
        return False


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def drop_capabilities(bounding: bool = True) -> None:
    """Empty the bounding, ambient, effective, permitted and inheritable sets, and set
    ``no_new_privs`` so neither ``execve`` nor a setuid binary can bring any back.  Without
    ``bounding`` the bounding set is taken as already empty (``empty_bounding_set``, done
    once by a stateless template for every cell it forks)."""
    if bounding:
        empty_bounding_set()
    try:
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError:
        pass
    _capset(0)
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def empty_bounding_set() -> None:
    """No capability can ever be gained again through ``execve`` (inherited by children)."""
    for cap in range(64):
        try:
            prctl(PR_CAPBSET_DROP, cap)
        except OSError as exc:
            if exc.errno == errno.EINVAL:
                break
            if exc.errno != errno.EPERM:  # EPERM: already without CAP_SETPCAP
                raise


def _capset(mask: int) -> None:
    """Effective and permitted capabilities become exactly ``mask`` (bits below 32),
    inheritable none."""
    header = _CapHeader(0x20080522, 0)
    data = (_CapData * 2)()
    data[0].effective = data[0].permitted = mask
    _check(_libc().capset(ctypes.byref(header), data), "capset")


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def load_seccomp(program: bytes) -> None:
    """Install a seccomp BPF program (``no_new_privs`` must be set); irrevocable, inherited
    by every thread and process started afterwards."""
    n = len(program) // ctypes.sizeof(_SockFilter)
    insns = (_SockFilter * n).from_buffer_copy(program)
    prog = _SockFprog(n, ctypes.cast(insns, ctypes.POINTER(_SockFilter)))
    _check(_libc().prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER),
                         ctypes.byref(prog), ctypes.c_ulong(0), ctypes.c_ulong(0)), "seccomp")


def join_fresh_keyring() -> bool:
    """Replace the inherited session keyring (the host's, when it has one) by a new, empty,
    anonymous one.  False when the kernel refused (no keyrings, or the uid's key quota)."""
    nr = _KEYCTL.get(platform.machine())
    if nr is None:
        return False
    ret = _libc().syscall(ctypes.c_long(nr), ctypes.c_long(KEYCTL_JOIN_SESSION_KEYRING),
                          ctypes.c_void_p(None))
    return ret >= 0


MADV_HUGEPAGE, MADV_COLLAPSE = 14, 25
HUGE_PAGE = 2 << 20


def collapse_huge_pages() -> int:
    """Back this process's private anonymous memory (the imported modules' objects) with
    transparent huge pages, where the kernel can (``MADV_COLLAPSE``, Linux 6.1+).  A fork
    then copies one page-table entry per 2 MB instead of 512, and a child's exit tears down
    as few: forking a session, or a stateless cell, costs a fraction.  Returns the bytes
    collapsed (0 where the kernel cannot)."""
    libc = _libc()
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    done = 0
    try:
        with open("/proc/self/maps") as f:
            lines = f.readlines()
    except OSError:
        return 0
    for line in lines:
        parts = line.split()
        if parts[1] != "rw-p" or (len(parts) > 5 and parts[5] != "[heap]"):
            continue
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        start, end = (lo + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1), hi & ~(HUGE_PAGE - 1)
        if end - start < HUGE_PAGE:
            continue
        libc.madvise(start, end - start, MADV_HUGEPAGE)
        if libc.madvise(start, end - start, MADV_COLLAPSE) == 0:
            done += end - start
    return done


_SYSV_IPC = ("shm", "sem", "msg")
IPC_RMID = 0


def remove_sysv_ipc() -> int | None:
    """Remove every System V shared memory segment, semaphore set and message queue of this
    process's IPC namespace (what a stateless cell left there: its template shares one
    namespace with all its cells, so nothing of one cell may reach the next).  They are
    listed by the session's own ``/proc/sysvipc``; removing needs no capability, since
    every object is owned by the session's one uid.  Returns how many were removed, or
    None when ``/proc/sysvipc`` cannot be read (the caller must not share the namespace)."""
    libc = _libc()
    removed = 0
    for kind in _SYSV_IPC:
        try:  # raw reads: a template pays each object it allocates in copy-on-write faults
            fd = os.open(f"/proc/sysvipc/{kind}", os.O_RDONLY | os.O_CLOEXEC)
            try:
                rows = b"".join(iter(lambda: os.read(fd, 1 << 16), b"")).splitlines()[1:]
            finally:
                os.close(fd)
        except OSError:
            return None
        for row in rows:
            ident = int(row.split()[1])
            if kind == "sem":
                ret = libc.semctl(ident, 0, IPC_RMID)
            else:
                ret = getattr(libc, f"{kind}ctl")(ident, IPC_RMID, None)
            removed += ret == 0
    return removed


def set_dumpable(flag: bool) -> None:
    """A process that is not dumpable cannot be inspected or written through
    ``/proc/<pid>/{mem,fd,environ,...}`` by anyone without ``CAP_SYS_PTRACE`` over it,
    even by a process of the same uid (the kernel checks ptrace access)."""
    prctl(PR_SET_DUMPABLE, int(flag))


def set_oom_score_adj(value: int) -> None:
    """Make this process (and what it starts) the OOM killer's first choice."""
    try:
        _write("/proc/self/oom_score_adj", str(value))
    except OSError:
        pass


def vm_size_bytes() -> int:
    """Current virtual memory size of this process (the base the memory limit adds to)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def count_user_tasks(uid: int) -> int:
    """Tasks (processes and threads) of ``uid`` visible in ``/proc`` (for a shared NPROC)."""
    n = 0
    try:
        names = os.listdir("/proc")
    except OSError:
        return 0
    for name in names:
        if not name.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{name}/task")
            if st.st_uid == uid:
                n += st.st_nlink - 2
        except OSError:
            continue
    return n


def _set(which: int, value: int) -> None:
    soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def cpu_limit(cpu_s: int) -> tuple[int, int]:
    """``RLIMIT_CPU`` (soft, hard) for ``cpu_s``: the soft limit raises ``CPULimitExceeded``
    in Python code, the hard one, a second later, kills; both within this process's own hard
    limit (a process may lower it, never raise it)."""
    soft, hard = int(cpu_s), int(cpu_s) + 1
    ceiling = resource.getrlimit(resource.RLIMIT_CPU)[1]
    if ceiling != resource.RLIM_INFINITY:
        soft, hard = min(soft, ceiling), min(hard, ceiling)
    return soft, hard


def apply_limits(limits: dict, base_vm: int, shared_nproc: bool) -> None:
    """Set this process's resource limits (inherited by everything it starts).

    ``memory_mb`` adds to the address space already mapped (the pre-imported libraries), so the
    figure is what the code itself may allocate.  ``cpu_s``: see ``cpu_limit`` (a stateless
    template leaves it out: ``RLIMIT_CPU`` counts a process's own CPU over its life, so each
    of its cells sets it after the fork instead, see ``interpreter.fresh_cell``).
    With ``shared_nproc`` (no user namespace) the process limit counts every task of the uid,
    so the allowance is added to what that uid already runs.
    """
    mb = 1024 * 1024
    if limits.get("memory_mb"):
        _set(resource.RLIMIT_AS, base_vm + int(limits["memory_mb"]) * mb)
    if limits.get("cpu_s"):
        resource.setrlimit(resource.RLIMIT_CPU, cpu_limit(limits["cpu_s"]))
    if limits.get("nproc"):
        n = int(limits["nproc"])
        if shared_nproc:
            n += count_user_tasks(os.getuid())
        _set(resource.RLIMIT_NPROC, n)
    if limits.get("nofile"):
        _set(resource.RLIMIT_NOFILE, int(limits["nofile"]))
    if limits.get("fsize_mb"):
        _set(resource.RLIMIT_FSIZE, int(limits["fsize_mb"]) * mb)
    _set(resource.RLIMIT_CORE, 0)
