"""How the fork server is started: the isolation modes, their command lines and environment.

Three modes, strongest first (``isolation="auto"`` takes the first that passes its self-test):

* ``bwrap``: bubblewrap runs the fork server in an allow-list filesystem (read-only ``/usr``,
  the Python installation and nothing else: no ``/etc``, no home, no project) with its own
  pid/net/IPC/UTS namespaces; every session adds its own user, mount, pid and network
  namespace below that (see ``sandbox/zygote.py``).
* ``unshare``: the same filesystem view and session namespaces, set up by the fork server
  itself with ``unshare(2)`` + ``pivot_root(2)``; needs root or unprivileged user namespaces.
* ``rlimits``: no namespaces at all (containers that forbid them): resource limits, a private
  temporary working directory, a hard kill of the session's process tree.  Not a security
  boundary: the host filesystem is readable and the network reachable.

When the host runs as root, the fork server drops to ``nobody`` (65534) so that the process
limit holds (the kernel exempts uid 0 from ``RLIMIT_NPROC``).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

MODES = ("bwrap", "unshare", "rlimits")
NOBODY = 65534
SANDBOX_DIR = Path(__file__).resolve().parents[1] / "sandbox"  # tools/python/sandbox
BWRAP_PKG_ROOT = "/opt/tir-sandbox"
TMP_STASH = "/.tir-tmp-binds"  # where allow-listed paths under /tmp are also bound
DEFAULT_PRELOAD = (
    "math", "cmath", "fractions", "decimal", "itertools", "functools", "collections",
    "statistics", "random", "re", "string", "heapq", "bisect", "operator", "numbers", "json",
    "time", "datetime", "typing", "copy", "subprocess", "numpy", "numpy.random", "sympy",
    "mpmath", "scipy",
)
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
_BOOT = ("import sys; sys.path.insert(0, {root!r}); from sandbox.zygote import main; "
         "sys.path.pop(0); main()")


@dataclass(frozen=True)
class LaunchSpec:
    """Everything needed to start one fork server: argv, environment and JSON config."""

    mode: str
    argv: list[str]
    env: dict[str, str]
    config: dict = field(default_factory=dict)


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def interpreter(python: str | None = None) -> str:
    """The path the fork server is started by: ``sys.executable`` with its folder resolved
    (symlinks and ``..``) and its own name kept.

    ``sys.executable`` is the path Python was launched by, as given: ``../repo/.venv/bin/python``
    becomes ``/here/../repo/.venv/bin/python``, which names nothing inside the sandbox (``/here``
    is not bound there), so bubblewrap could not start it and ``auto`` fell back to weaker
    isolation.  The file name itself is kept, not resolved: a virtual environment's ``python``
    is a link whose location tells Python its ``pyvenv.cfg``, and resolving it would run the
    base interpreter without the environment's packages."""
    python = python or sys.executable
    return os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(python))),
                        os.path.basename(python))


def python_dirs(python: str | None = None) -> list[str]:
    """Directories the interpreter needs: its prefixes and ``sysconfig`` library paths, each
    also resolved (the sandbox runs the interpreter by its resolved folder: ``interpreter``),
    the folder it is started from and its final target's."""
    python = interpreter(python)
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    cfg = sysconfig.get_paths()
    paths.update(cfg[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in cfg)
    paths |= {os.path.realpath(p) for p in paths if p}
    paths |= {os.path.dirname(python), os.path.dirname(os.path.realpath(python))}
    return [p for p in paths if p and os.path.isdir(p)]


def _dedupe(paths: list[str]) -> list[str]:
    """Drop paths already covered by an ancestor in the list; keep order short → long."""
    out: list[str] = []
    for p in sorted({os.path.normpath(p) for p in paths}, key=lambda s: (s.count("/"), s)):
        if not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return out


def allowed_paths(extra: tuple[str, ...] = ()) -> list[str]:
    """The read-only allow-list of the sandbox filesystem."""
    system = [d for d in _SYSTEM_DIRS if os.path.lexists(d)]
    links = [d for d in system if os.path.islink(d)]
    rest = _dedupe([d for d in system if d not in links] + python_dirs() + list(extra))
    return links + rest


def world_readable(path: str) -> bool:
    """Whether ``nobody`` can reach and read ``path`` (every ancestor o+x, itself o+r)."""
    p = Path(path).resolve()
    for anc in [*reversed(p.parents), p]:
        try:
            mode = anc.stat().st_mode
        except OSError:
            return False
        if not mode & stat.S_IXOTH:
            return False
    return bool(p.stat().st_mode & stat.S_IROTH)


def sandbox_env() -> dict[str, str]:
    """A clean environment: no secrets from the host, one BLAS thread, a UTF-8 locale, and
    ``LD_BIND_NOW`` for the fork server alone (it removes it at start, see ``zygote.main``)."""
    bin_dir = os.path.join(sys.prefix, "bin")
    return {
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        "NUMEXPR_NUM_THREADS": "1", "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1",
        "LD_BIND_NOW": "1",
    }


def tmp_binds(binds: list[str]) -> list[str]:
    """Allow-listed paths under ``/tmp`` (a Python installed there, say).  Each session mounts
    its own empty ``/tmp``, which would hide them, so they are also bound at
    ``TMP_STASH/<i>`` and bound back over the session's ``/tmp`` (see jail.mount_session_fs)."""
    return [b for b in binds if b == "/tmp" or b.startswith("/tmp/")]


def _new_root_mountpoint(binds: list[str]) -> str:
    """An existing directory that no bind lives under, to build the new root on."""
    for cand in ("/mnt", "/media", "/srv", "/opt", "/tmp", "/var/tmp"):
        if os.path.isdir(cand) and not os.path.islink(cand) and not any(
                b == cand or b.startswith(cand + "/") for b in binds):
            return cand
    raise RuntimeError("no free directory to build the sandbox root on")


def _bwrap_args(binds: list[str], privileged: bool) -> list[str]:
    args = [bwrap_path() or "bwrap", "--die-with-parent", "--new-session", "--unshare-pid",
            "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    args += (["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_KILL"]
             if privileged
             else ["--unshare-user"])
    args += ["--tmpfs", "/tmp"]  # first: binds that live under /tmp are made inside it
    made: set[str] = set()
    for path in binds:
        if os.path.islink(path) and os.path.dirname(path) == "/":
            args += ["--symlink", os.readlink(path), path]
            continue
        for anc in reversed(Path(path).parents):
            a = str(anc)
            if a != "/" and a not in made and not any(a == b or a.startswith(b + "/")
                                                      for b in binds if b != path):
                args += ["--perms", "0755", "--dir", a]
                made.add(a)
        args += ["--ro-bind", path, path]
    for i, path in enumerate(tmp_binds(binds)):
        args += ["--perms", "0755", "--dir", f"{TMP_STASH}/{i}", "--ro-bind", path,
                 f"{TMP_STASH}/{i}"]
    args += ["--dev", "/dev", "--bind", "/proc", "/proc",
             "--perms", "0755", "--dir", BWRAP_PKG_ROOT,
             "--ro-bind", str(SANDBOX_DIR), f"{BWRAP_PKG_ROOT}/sandbox",
             # bwrap's root and /dev are tmpfs the sandbox uid may own: no writes there
             "--remount-ro", "/dev", "--remount-ro", "/", "--clearenv"]
    for k, v in sandbox_env().items():
        args += ["--setenv", k, v]
    return args + ["--chdir", "/", "--"]


def launch_spec(mode: str, ctrl_fd: int, preload: tuple[str, ...], disk_mb: int,
                extra_binds: tuple[str, ...] = (), ready_timeout_s: float = 30.0,
                session_options: dict | None = None) -> LaunchSpec:
    """The command line that starts a fork server in ``mode`` with control socket ``ctrl_fd``.

    ``session_options`` go into the fork server's config as they are: ``seccomp_bpf`` (the
    filter every session installs) and ``stop_others`` (sessions stop their own processes
    between calls when the host cannot)."""
    if mode not in MODES:
        raise ValueError(f"isolation must be one of {MODES} or 'auto', got {mode!r}")
    root = os.geteuid() == 0
    binds = allowed_paths(extra_binds)
    config = {"isolation": mode, "ctrl_fd": ctrl_fd, "preload": list(preload),
              "disk_mb": int(disk_mb), "parent_pid": os.getpid(), "drop_uid": None,
              "drop_gid": None, "ready_timeout_s": ready_timeout_s,
              "tmp_binds": tmp_binds(binds), "tmp_stash": TMP_STASH, **(session_options or {})}
    needs_drop = root and (mode != "rlimits" or world_readable(os.path.realpath(interpreter())))
    if needs_drop:
        config["drop_uid"] = config["drop_gid"] = NOBODY
        # each session switches to a host uid of its own (see uids.py): only as root, and
        # only with namespaces (a session's user namespace maps onto that uid)
        config["session_uids"] = (mode != "rlimits"
                                  and config.get("self_test_uid") is not None)
    python = [interpreter(), "-I", "-B", "-c"]
    if mode == "bwrap":
        if bwrap_path() is None:
            raise RuntimeError("bubblewrap (bwrap) is not installed")
        argv = _bwrap_args(binds, privileged=root) + python + [
            _BOOT.format(root=BWRAP_PKG_ROOT)]
    else:
        argv = python + [_BOOT.format(root=str(SANDBOX_DIR.parent))]
        if mode == "unshare":
            config.update(binds=binds, devices=[d for d in _DEVICES if os.path.exists(d)],
                          new_root=_new_root_mountpoint(binds))
    return LaunchSpec(mode, argv + [json.dumps(config)], sandbox_env(), config)
