"""Per-session control groups (cgroup v1 ``memory`` and ``pids``), in a subtree of our own.

What ``RLIMIT_AS`` misses, a memory cgroup counts: every process of the session together, and
the kernel memory it makes the kernel hold (memfd and tmpfs pages, pipe buffers, page tables),
so a session cannot grow past its limit by forking or by parking data in the kernel, and the
OOM killer, when the limit is hit, picks a process of that session only.  The ``pids``
controller caps its processes and threads whatever the uid (root included).  The pids list,
and the ``freezer`` controller where the host has one, are how the host stops every process
of a session between calls (``stop``/``cont``): frozen, a session cannot fork, so its process
list is complete while each process gets its ``SIGSTOP``, and it is thawed at once (stopped,
each still dies of SIGKILL; a frozen one would not, and a host that died would leave it
frozen).  ``interpreter_state``
``interpreter_state`` reads from the kernel whether the interpreter waits for its next request
reads from the kernel whether the interpreter waits for its next request
(the only sign the host takes that a cell is over; see docs/sandbox.md, threat model).

Layout: ``<mount>/<controller>/tir-envs/<host pid>-<n>/s<sid>``.  Only directories this module
made are ever written or removed; trees left by a host that died are swept (their processes
killed, their directories removed) when the next pool starts.  The session's keeper joins its
cgroups itself, by writing ``0`` to ``cgroup.procs`` descriptors the host opened and passed it.
"""

from __future__ import annotations

import errno
import itertools
import os
import platform
import signal
import time

ROOT = "/sys/fs/cgroup"
TOP = "tir-envs"
CONTROLLERS = ("memory", "pids")
FREEZER = "freezer"        # optional: without it, a stop is signals only (see ``stop``)
FREEZE_WAIT_READS = 2000   # reads of freezer.state while the session's tasks freeze
KILLED_GONE_S = 2.0        # at removal: how long killed processes get to leave a cgroup
KEEPER_PIDS = 1            # the keeper process is in the cgroup too
MEMORY_HEADROOM_MB = 64    # interpreter pages copied on write, page tables, kernel objects
STOP_ROUNDS = 16
STOP_WAIT_READS = 200      # reads of /proc/<pid>/syscall while a SIGSTOP lands
REQUEST_FD = 3             # the interpreter reads its requests there (sandbox/zygote.py)
# recvfrom(2), which the interpreter's request loop blocks in (socket.recv_into)
RECVFROM = {"x86_64": 45, "aarch64": 207, "arm64": 207, "riscv64": 207, "ppc64le": 337,
            "s390x": 371}.get(platform.machine())
_COUNTER = itertools.count(1)


def _read_pids(path: str) -> list[int]:
    """A fresh read of a ``cgroup.procs``.  Always a new open: cgroup v1 caches the pid list
    per open file, so re-reading a descriptor kept open returns a stale list."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        data = b""
        while chunk := os.read(fd, 1 << 16):
            data += chunk
        return [int(x) for x in data.split()]
    except (OSError, ValueError):
        return []
    finally:
        os.close(fd)


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _pidfd_signal(fd: int, sig: int) -> None:
    try:
        signal.pidfd_send_signal(fd, sig)
    except OSError:
        pass


def _signal_pid(pid: int, sig: int) -> None:
    """Signal ``pid`` through a pidfd closed at once (no descriptor kept), or plainly on a
    kernel without pidfds."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        _signal_all([pid], sig)
        return
    try:
        _pidfd_signal(fd, sig)
    finally:
        os.close(fd)


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


class SessionCgroup:
    """One session's cgroups (one directory per controller)."""

    def __init__(self, dirs: dict[str, str]):
        self.dirs = dirs
        self._procs = os.path.join(dirs["pids"], "cgroup.procs")
        self._freezer = (os.path.join(dirs[FREEZER], "freezer.state") if FREEZER in dirs
                         else None)
        self.keeper = 0
        self.interpreter = 0
        self._syscall_fd = -1     # the interpreter's /proc/<pid>/syscall, kept open
        self._interp_fd = -1      # the interpreter's pidfd, kept open
        self._tasks_fd = -1       # the session's pids.current (threads included), kept open
        self._others = False      # stop() stopped processes other than the interpreter

    def join_fds(self) -> list[int]:
        """``cgroup.procs`` of each controller, opened for the keeper to write ``0`` into."""
        fds = []
        try:
            for d in self.dirs.values():
                fds.append(os.open(os.path.join(d, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC))
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        return fds

    def set_limits(self, memory_mb: int | None, nproc: int | None) -> None:
        """The session's limits; ``None`` leaves one unlimited."""
        if memory_mb:
            limit = str((int(memory_mb) + MEMORY_HEADROOM_MB) * 1024 * 1024)
            mem = self.dirs["memory"]
            _write(os.path.join(mem, "memory.limit_in_bytes"), limit)
            memsw = os.path.join(mem, "memory.memsw.limit_in_bytes")
            if os.path.exists(memsw):  # no swapping past the limit either
                _write(memsw, limit)
        if nproc:
            _write(os.path.join(self.dirs["pids"], "pids.max"), str(int(nproc) + KEEPER_PIDS))

    def pids(self) -> list[int]:
        return _read_pids(self._procs)

    def find_keeper(self) -> None:
        """Once the session is ready (its keeper and interpreter are all it holds): remember
        the keeper (whose parent is outside), which runs no code of the model and is never
        stopped, and the interpreter (the keeper's child), whose state ``interpreter_state``
        reads."""
        pids = set(self.pids())
        parents = {}
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    parents[pid] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
        self.keeper = next((p for p, pp in parents.items() if pp not in pids), 0)
        self.interpreter = next((p for p, pp in parents.items() if pp == self.keeper), 0)
        if self.interpreter:
            try:
                self._interp_fd = os.pidfd_open(self.interpreter)
            except (AttributeError, OSError):
                self._interp_fd = -1
        try:
            self._tasks_fd = os.open(os.path.join(self.dirs["pids"], "pids.current"),
                                     os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._tasks_fd = -1
        if self.interpreter and RECVFROM is not None:
            try:
                self._syscall_fd = os.open(f"/proc/{self.interpreter}/syscall",
                                           os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                self._syscall_fd = -1

    def interpreter_state(self, settle: bool = True) -> str:
        """What the interpreter's main thread is doing, read from the kernel (never from the
        session): ``waiting`` (blocked reading its next request, as once a cell is over),
        ``busy`` (anything else), ``unsettled`` (a SIGSTOP sent to it has not landed yet),
        or ``unknown`` (this host cannot read ``/proc/<pid>/syscall``).  Without ``settle``,
        one read: a thread on a CPU is ``busy``."""
        if self._syscall_fd < 0:
            return "unknown"
        try:
            for _ in range(STOP_WAIT_READS if settle else 1):  # a SIGSTOP lands asynchronously:
                fields = os.pread(self._syscall_fd, 256, 0).split()  # until it has, the file
                if fields[:1] != [b"running"]:                         # says "running"
                    break
                if settle:
                    os.sched_yield()
            else:
                return "unsettled" if settle else "busy"
            waiting = int(fields[0]) == RECVFROM and int(fields[1], 16) == REQUEST_FD
        except OSError:
            return "unknown"
        except (IndexError, ValueError):
            return "busy"
        return "waiting" if waiting else "busy"

    def stop(self) -> bool:
        """SIGSTOP every process of the session but the keeper; False when the session did
        not freeze in time (then nothing is stopped for sure: the caller looks again later,
        the call's deadline still running).  Stopped processes still die
        of SIGKILL: a host that dies leaves nothing frozen behind.  Host descriptors stay
        bounded whatever the session forks and however often this is retried: the
        interpreter's pidfd is kept for the session's life, any other process is signalled
        through a pidfd closed at once."""
        if self._interp_fd >= 0:
            # Usually the session is the keeper and the interpreter's one thread: after the
            # signal, a count of 2 means nothing else exists to stop.  (A fork of the
            # interpreter charges the pids cgroup before its signal check: one under way is
            # counted.  One the interpreter starts after this read, before the stop lands, is
            # not: the caller calls ``stop`` again once the stop has landed.)
            _pidfd_signal(self._interp_fd, signal.SIGSTOP)
            if self._tasks() == 2:
                return True
        if self._freezer is not None:
            frozen = self._stop_frozen()
            if frozen is not None:
                return frozen
        self._stop_rounds()
        return True

    def _stop_frozen(self) -> bool | None:
        """Freeze the session (no process of it can run or fork), SIGSTOP every process the
        now complete list holds, thaw: each stops before it returns to user space.  False
        when its tasks did not all freeze within a few thousand reads (a loaded machine:
        they must each get a CPU first; the reactor does not wait longer), None when the
        freezer cannot be used (then ``stop`` falls back to signal rounds)."""
        try:
            fd = os.open(self._freezer, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            os.write(fd, b"FROZEN")
            for _ in range(FREEZE_WAIT_READS):  # FREEZING until every task is frozen
                if os.pread(fd, 16, 0).startswith(b"FROZEN"):
                    break
                os.sched_yield()
            else:
                return False  # thawed below; looked at again later
            for pid in self.pids():
                if pid == self.interpreter and self._interp_fd >= 0:
                    _pidfd_signal(self._interp_fd, signal.SIGSTOP)
                elif pid != self.keeper:
                    self._others = True
                    _signal_pid(pid, signal.SIGSTOP)
            return True
        except OSError:
            return None
        finally:
            try:
                os.write(fd, b"THAWED")
            except OSError:
                pass
            os.close(fd)

    def _stop_rounds(self) -> None:
        """Without a freezer: SIGSTOP what the list shows, again for any that forked
        meanwhile (a process that forks continuously can outrun it; see docs/sandbox.md)."""
        seen: set[int] = {self.keeper}
        for _ in range(STOP_ROUNDS):
            new = [p for p in self.pids() if p not in seen]
            if not new:
                break
            for pid in new:
                if pid == self.interpreter and self._interp_fd >= 0:
                    _pidfd_signal(self._interp_fd, signal.SIGSTOP)
                else:
                    self._others = True
                    _signal_pid(pid, signal.SIGSTOP)
            seen.update(new)

    def _tasks(self) -> int:
        """Tasks (threads) in the session's pids cgroup, read afresh; -1 when unknown."""
        try:
            return int(os.pread(self._tasks_fd, 32, 0)) if self._tasks_fd >= 0 else -1
        except (OSError, ValueError):
            return -1

    def cont(self) -> None:
        """SIGCONT what ``stop`` stopped: the interpreter, and every other process of the
        session (a fresh read of its cgroup: nothing can have been added while stopped)."""
        if self._interp_fd >= 0:
            _pidfd_signal(self._interp_fd, signal.SIGCONT)
        elif self.interpreter:
            _signal_pid(self.interpreter, signal.SIGCONT)
        if self._others:
            self._others = False
            for pid in self.pids():
                if pid not in (self.keeper, self.interpreter):
                    _signal_pid(pid, signal.SIGCONT)

    def descriptors(self) -> int:
        """Host descriptors this session holds open (bounded: see ``stop``)."""
        return (self._interp_fd >= 0) + (self._syscall_fd >= 0) + (self._tasks_fd >= 0)

    def max_memory_bytes(self) -> int:
        try:
            with open(os.path.join(self.dirs["memory"], "memory.max_usage_in_bytes")) as f:
                return int(f.read())
        except (OSError, ValueError):
            return 0

    def remove(self) -> bool:
        """Kill what is left and remove the directories; False while some are still busy."""
        _thaw(self.dirs.get(FREEZER))
        _signal_all(self.pids(), signal.SIGKILL)
        if self._interp_fd >= 0:
            os.close(self._interp_fd)
            self._interp_fd = -1
        for name in ("_syscall_fd", "_tasks_fd"):
            if getattr(self, name) >= 0:
                os.close(getattr(self, name))
                setattr(self, name, -1)
        done = True
        for d in self.dirs.values():
            try:
                os.rmdir(d)
            except FileNotFoundError:
                pass
            except OSError:
                done = False
        return done


class CgroupTree:
    """The pool's own subtree.  ``create()`` returns ``(tree, None)`` or ``(None, why not)``."""

    def __init__(self, pool_dirs: dict[str, str]):
        self.pool_dirs = pool_dirs

    @classmethod
    def create(cls, root: str = ROOT) -> tuple["CgroupTree | None", str | None]:
        tops = {c: os.path.join(root, c, TOP) for c in CONTROLLERS}
        for c in CONTROLLERS:
            base = os.path.join(root, c)
            if not os.path.exists(os.path.join(base, "cgroup.procs")) or os.path.exists(
                    os.path.join(root, "cgroup.controllers")):
                return None, f"no cgroup v1 {c!r} hierarchy at {base}"
            if not os.access(base, os.W_OK):
                return None, f"{base} is not writable (not root, or not delegated)"
        freezer = os.path.join(root, FREEZER)
        if os.path.exists(os.path.join(freezer, "cgroup.procs")) and os.access(freezer,
                                                                                os.W_OK):
            # first: a sweep thaws the frozen before the other controllers' sweeps kill
            tops = {FREEZER: os.path.join(freezer, TOP), **tops}
        name = f"{os.getpid()}-{next(_COUNTER)}"
        made: dict[str, str] = {}
        try:
            for c, top in tops.items():
                if os.path.isdir(top):
                    _sweep_stale(top)
                for attempt in range(3):  # another pool may remove the shared top meanwhile
                    os.makedirs(top, exist_ok=True)
                    try:
                        os.mkdir(os.path.join(top, name))
                        break
                    except FileNotFoundError:
                        if attempt == 2:
                            raise
                made[c] = os.path.join(top, name)
        except OSError as e:
            for d in made.values():
                _rmdir_quietly(d)
            return None, f"cannot create {TOP} cgroups: {e}"
        return cls(made), None

    @property
    def freezer(self) -> bool:
        """Whether sessions get a freezer cgroup (see ``SessionCgroup.stop``)."""
        return FREEZER in self.pool_dirs

    def session(self, sid: int) -> SessionCgroup:
        dirs = {c: os.path.join(d, f"s{sid}") for c, d in self.pool_dirs.items()}
        made = []
        try:
            for d in dirs.values():
                os.mkdir(d)
                made.append(d)
            return SessionCgroup(dirs)
        except OSError:
            for d in made:
                _rmdir_quietly(d)
            raise

    def busy(self) -> bool:
        """Whether any process is still in one of the pool's session cgroups."""
        d = self.pool_dirs["pids"]
        try:
            names = os.listdir(d)
        except OSError:
            return False
        return any(_read_pids(os.path.join(d, n, "cgroup.procs")) for n in names
                   if os.path.isdir(os.path.join(d, n)))

    def remove(self) -> None:
        """Remove every session directory left and the pool's own (best effort)."""
        for d in self.pool_dirs.values():
            _remove_tree(d)
            _rmdir_quietly(os.path.dirname(d))  # the shared top, when no other pool uses it


def _rmdir_quietly(path: str) -> None:
    try:
        os.rmdir(path)
    except OSError:
        pass


def _remove_tree(pool_dir: str) -> None:
    try:
        names = os.listdir(pool_dir)
    except OSError:
        return
    for name in names:
        d = os.path.join(pool_dir, name)
        if os.path.isdir(d):
            _thaw(d)  # frozen processes do not die of SIGKILL
            procs = os.path.join(d, "cgroup.procs")
            _signal_all(_read_pids(procs), signal.SIGKILL)
            deadline = time.monotonic() + KILLED_GONE_S  # a busy cgroup cannot be removed
            while _read_pids(procs) and time.monotonic() < deadline:
                time.sleep(0.01)
            _rmdir_quietly(d)
    _rmdir_quietly(pool_dir)


def _thaw(freezer_dir: str | None) -> None:
    """Thaw a freezer cgroup (no-op for other controllers' directories)."""
    if freezer_dir is None:
        return
    try:
        _write(os.path.join(freezer_dir, "freezer.state"), "THAWED")
    except OSError:
        pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as e:
        return e.errno == errno.EPERM
    return True


def _sweep_stale(top: str) -> None:
    """Pool trees of hosts that are gone (a SIGKILLed trainer): kill and remove."""
    for name in os.listdir(top):
        owner = name.split("-", 1)[0]
        if owner.isdigit() and int(owner) != os.getpid() and not _pid_alive(int(owner)):
            _remove_tree(os.path.join(top, name))
