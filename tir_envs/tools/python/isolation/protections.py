"""What this host lets the pool enforce: per-session cgroups, a host uid per session, the
seccomp filter; and, for each it cannot, a warning saying what no longer holds.

Prepared once per pool, before its first fork server starts (see docs/sandbox.md, the
guarantees table).
"""

from __future__ import annotations

import logging

from tir_envs.tools.python.isolation import syscall_filter
from tir_envs.tools.python.isolation.cgroups import CgroupTree
from tir_envs.tools.python.isolation.uids import UidPool

log = logging.getLogger("tir_envs.sandbox")

_WITHOUT = {"cgroups": "per-session cgroups", "freezer": "the cgroup freezer",
            "uids": "a host uid per session",
            "seccomp": "a seccomp filter", "fresh_cells": "namespaces per stateless call"}


class Protections:
    """The host-side mechanisms of one pool (``None`` where this host has none)."""

    def __init__(self) -> None:
        self.prepared = False
        self.cgroups: CgroupTree | None = None
        self.uids: UidPool | None = None
        self.seccomp: str | None = None
        self.degraded: dict[str, str] = {}   # mechanism -> why it is not in use

    def prepare(self) -> None:
        """Once: the cgroup subtree, the uid block and the seccomp filter, or a warning
        saying what will not hold without each."""
        if self.prepared:
            return
        self.prepared = True
        self.cgroups, why = CgroupTree.create()
        self._degrade("cgroups", why, "memory is limited per process (RLIMIT_AS) only, kernel "
                      "memory (memfd, tmpfs, pipes) is not counted, and only child processes "
                      "(not threads) are stopped between calls")
        if self.cgroups is not None and not self.cgroups.freezer:
            self._degrade("freezer", "no writable cgroup v1 freezer hierarchy", "a session is "
                          "stopped between calls by signals alone, which a process that forks "
                          "continuously can outrun")
        self.uids, why = UidPool.create()
        self._degrade("uids", why, "per-user kernel quotas (descriptors in flight, pipe "
                      "buffers, inotify) are shared by all sessions")
        self.seccomp, why = syscall_filter.cached_bpf()
        self._degrade("seccomp", why, "keyrings are still fresh per session, but AF_VSOCK and "
                      "other socket families, inotify, file locks and pipe growth are not denied")

    def _degrade(self, key: str, why: str | None, consequence: str) -> None:
        """Record a protection this host cannot give (``why``) and warn what no longer holds."""
        if not why:
            return
        self.degraded[key] = why
        log.warning("python sandbox without %s (%s): %s; see docs/sandbox.md",
                    _WITHOUT[key], why, consequence)

    def check_setup(self, msg: dict) -> None:
        """A session's setup acknowledgement says whether its stateless cells get namespaces
        of their own (sandbox/fresh_cell.py); warn once where the kernel refused them."""
        if msg.get("fresh_cells") is False and "fresh_cells" not in self.degraded:
            self._degrade("fresh_cells", str(msg.get("fresh_cells_error")), "a stateless call's "
                          "/tmp, /dev/shm, pid and IPC counters are shared with the calls before "
                          "it")

    def launch_options(self) -> dict:
        """What every fork server's sessions need to know of these protections."""
        self.prepare()
        return {"seccomp_bpf": self.seccomp, "stop_others": self.cgroups is None,
                "self_test_uid": self.uids.self_test if self.uids else None}

    def check_first_server(self, mode: str, info: dict) -> None:
        """What the first ready fork server says that weakens the guarantees (see docs)."""
        if self.seccomp is not None and not info.get("seccomp"):
            self.degraded["seccomp"] = "the kernel refused the filter"
            log.warning("python sandbox: sessions could not install the seccomp filter "
                        "(kernel without seccomp filters?); see docs/sandbox.md")
        if mode == "rlimits":
            log.warning("python sandbox without namespaces (isolation=rlimits): code can "
                        "read the host's files and reach the network%s; see docs/sandbox.md",
                        ", and runs as root" if info.get("uid") == 0 else "")
