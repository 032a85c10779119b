"""The seccomp filter every sandboxed session installs before running code.

Built once per pool on the host with libseccomp (``pyseccomp``) and handed to the fork server
as raw BPF, so nothing inside the sandbox needs libseccomp.  Default: allow.  Denied (``EPERM``
unless said otherwise), because namespaces do not isolate them or they reach past the session:

* the kernel keyring (``keyctl``, ``add_key``, ``request_key``): keys are per uid, not per
  namespace;
* socket families other than ``AF_UNIX``, ``AF_INET``, ``AF_INET6`` and ``NETLINK_ROUTE``
  (``EAFNOSUPPORT``; these four stay inside the session's network namespace): ``AF_VSOCK``
  reaches the hypervisor, audit/uevent netlink, packet, bluetooth and friends the kernel;
* other processes' memory and descriptors (``ptrace``, ``process_vm_readv``/``writev``,
  ``pidfd_getfd``), ``bpf``, ``perf_event_open``, ``userfaultfd``, ``io_uring_*`` (its
  operations bypass this filter), kernel modules, ``kexec``, ``reboot``, swap, accounting,
  ``mount``/``pivot_root``/``setns``/``unshare``, ``open_by_handle_at``;
* per-uid kernel quotas shared with other sessions: ``inotify``/``fanotify`` instances,
  POSIX message queues, growing pipes (``fcntl(F_SETPIPE_SZ)``);
* file locks (``flock``, ``fcntl`` record locks) succeed without locking: a lock on a
  read-only file bound from the host would be seen by the host and other sessions.
"""

from __future__ import annotations

import base64
import errno
import functools
import socket
import tempfile

DENIED = (
    "keyctl", "add_key", "request_key", "ptrace", "process_vm_readv", "process_vm_writev",
    "pidfd_getfd", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "init_module", "finit_module", "delete_module", "kexec_load",
    "kexec_file_load", "reboot", "swapon", "swapoff", "acct", "mount", "umount2", "pivot_root",
    "setns", "unshare", "open_by_handle_at", "inotify_init", "inotify_init1", "fanotify_init",
    "mq_open", "syslog", "quotactl", "lookup_dcookie", "vhangup",
)
ALLOWED_FAMILIES = (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK)
NETLINK_ROUTE = 0
F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW, F_SETPIPE_SZ = 6, 7, 37, 38, 1031


def build_bpf() -> tuple[str | None, str | None]:
    """(base64 BPF program, None), or (None, why) when libseccomp cannot be used here."""
    try:
        import pyseccomp as sc
    except Exception as e:  # noqa: BLE001 - missing package or missing libseccomp.so
        return None, f"pyseccomp/libseccomp unavailable ({type(e).__name__}: {e})"
    try:
        f = sc.SyscallFilter(sc.ALLOW)
        for name in DENIED:
            try:
                f.add_rule(sc.ERRNO(errno.EPERM), name)
            except Exception:  # noqa: BLE001 - a syscall this architecture lacks
                continue
        # socket families: deny every value but the allowed ones (one rule per gap)
        allowed = sorted(int(a) for a in ALLOWED_FAMILIES)
        for call in ("socket", "socketpair"):
            lo = 0
            for fam in allowed:
                for v in range(lo, fam):
                    f.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), call, sc.Arg(0, sc.EQ, v))
                lo = fam + 1
            f.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), call, sc.Arg(0, sc.GE, lo))
            f.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), call, sc.Arg(0, sc.EQ, socket.AF_NETLINK),
                       sc.Arg(2, sc.NE, NETLINK_ROUTE))
        f.add_rule(sc.ERRNO(errno.EPERM), "fcntl", sc.Arg(1, sc.EQ, F_SETPIPE_SZ))
        for cmd in (F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW):
            f.add_rule(sc.ERRNO(0), "fcntl", sc.Arg(1, sc.EQ, cmd))
        f.add_rule(sc.ERRNO(0), "flock")
        with tempfile.TemporaryFile() as out:
            f.export_bpf(out)
            out.flush()
            out.seek(0)
            program = out.read()
    except Exception as e:  # noqa: BLE001 - never let the filter keep the sandbox from starting
        return None, f"building the seccomp filter failed ({type(e).__name__}: {e})"
    if not program or len(program) % 8:
        return None, "libseccomp exported an empty or malformed program"
    return base64.b64encode(program).decode("ascii"), None


@functools.lru_cache(maxsize=1)
def cached_bpf() -> tuple[str | None, str | None]:
    """``build_bpf()`` once per process."""
    return build_bpf()
