"""Soak the local sandbox: many sessions opened, used and closed, watching for leaks.

Each session sets a variable, reads it back, and every 50th also leaves a daemonised
background process behind (which closing must kill).  Every ``--every`` sessions the script
samples the host process's open file descriptors and memory, the number of processes in the
sandbox's process tree (fork server, keepers, interpreters, anything they started) and that
tree's memory.  At the end, with every session closed, the tree must be back to its idle size
(fork servers + warm spares; servers retire and are replaced along the way), the descriptors back to where they started, memory must not
have grown without bound, and where the pool uses cgroups, one session cgroup per live
session is left (the spares'), and none at all once the pool has shut down; host uids in
use back to one per live session, and no process of the pool's uid block left after
shutdown.  Every 10th session also makes a one-shot (stateless) call.  Prints the samples and the checks as JSON; exit status 1 if a check
fails.  ``tests/test_sandbox_soak.py`` (marker ``soak``) runs it with 10,000 sessions.

Usage: ``python benchmarks/perf/sandbox_soak.py [--sessions 10000] [--concurrency 32]
[--isolation auto] [--fork-servers 4] [--sessions-per-fork-server 1000]`` (a small
``--sessions-per-fork-server`` retires and replaces fork servers often).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tir_envs.bench.perf.quick import QUICK, pick  # noqa: E402

from tir_envs.tools.python import LocalBackend, PythonTool  # noqa: E402
from tir_envs.tools.python.isolation.uids import BLOCK, processes_of  # noqa: E402

RSS_GROWTH_LIMIT_MB = 64


def _proc_table() -> dict[int, tuple[int, int, int]]:
    """pid -> (ppid, rss_kb, CPU ticks) for every visible process; the ticks are its own
    user + system time plus that of its reaped children (so a tree's sum also counts the
    processes that already exited, e.g. the children of a stateless template)."""
    table = {}
    page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            table[int(name)] = (int(fields[1]), int(fields[21]) * page_kb,
                                sum(int(x) for x in fields[11:15]))
        except (OSError, IndexError, ValueError):
            continue
    return table


def _descendants(root: int, table: dict) -> set[int]:
    """``root`` and every process below it in ``table``."""
    children: dict[int, list[int]] = {}
    for pid, row in table.items():
        children.setdefault(row[0], []).append(pid)
    seen, stack = set(), [root]
    while stack:
        pid = stack.pop()
        if pid in seen or pid not in table:
            continue
        seen.add(pid)
        stack += children.get(pid, [])
    return seen


def tree_cpu_s(root: int) -> float:
    """CPU seconds used so far by ``root``'s descendants (not ``root`` itself), the exited
    ones included once reaped."""
    table = _proc_table()
    seen = _descendants(root, table) - {root}
    return sum(table[p][2] for p in seen) / os.sysconf("SC_CLK_TCK")


def sandbox_tree(pool) -> tuple[int, int]:
    """(processes, total RSS in kB) of every fork server of ``pool`` and all below them (a
    retired server still running counts until it exits)."""
    table = _proc_table()
    seen = set().union(*(_descendants(s["pid"], table) for s in pool.info()["fork_servers"]))
    return len(seen), sum(table[p][1] for p in seen)


def host_rss_kb() -> int:
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith("VmRSS:")).split()[1])


def session_cgroups(pool) -> list[str]:
    """The session cgroup directories the pool has now (every controller)."""
    tree_ = pool.protections.cgroups
    if tree_ is None:
        return []
    found = []
    for d in tree_.pool_dirs.values():
        if os.path.isdir(d):
            found += [os.path.join(d, n) for n in os.listdir(d) if n.startswith("s")]
    return found


def sample(backend: LocalBackend, done: int, started: float) -> dict:
    procs, rss = sandbox_tree(backend.pool)
    return {"sessions": done, "elapsed_s": round(time.perf_counter() - started, 1),
            "host_fds": len(os.listdir("/proc/self/fd")), "host_rss_mb": round(host_rss_kb() / 1024, 1),
            "sandbox_processes": procs, "sandbox_rss_mb": round(rss / 1024, 1),
            "session_cgroups": len(session_cgroups(backend.pool)),
            "uids_in_use": backend.pool.info()["uids_in_use"]}


async def settle(backend: LocalBackend, expect: int, timeout: float = 30.0) -> int:
    """Wait until the sandbox tree has ``expect`` processes (spares refilled, the dead gone)."""
    deadline = time.monotonic() + timeout
    while True:
        procs, _ = sandbox_tree(backend.pool)
        if procs == expect or time.monotonic() > deadline:
            return procs
        await asyncio.sleep(0.1)


async def steady(backend: LocalBackend, timeout: float = 30.0) -> int:
    """Wait until the sandbox tree's size holds for 1.5 s (the session ``wait_ready``
    opened and closed is gone: since issue 29 the servers are all up right after it)."""
    deadline = time.monotonic() + timeout
    last, same = -1, 0
    while same < 3 and time.monotonic() < deadline:
        procs, _ = sandbox_tree(backend.pool)
        same, last = (same + 1 if procs == last else 0), procs
        await asyncio.sleep(0.5)
    return last


async def soak(sessions: int = 10_000, concurrency: int = 32, isolation: str = "auto",
               every: int = 1000, **pool_options) -> dict:
    """``pool_options``: more ``LocalBackend`` settings (e.g. ``sessions_per_fork_server``)."""
    backend = LocalBackend(isolation=isolation, spares=4, **pool_options)
    info = backend.pool.wait_all_servers(timeout=300)
    tool = PythonTool(backend=backend, timeout_s=30)
    one_shot = PythonTool(backend=backend, timeout_s=30, stateful=False)
    idle_procs = await steady(backend)
    started = time.perf_counter()
    baseline = sample(backend, 0, started)
    samples, failures, done = [baseline], [], 0
    queue = iter(range(sessions))

    async def one(i: int) -> None:
        s = await tool.open_session()
        try:
            r1 = await tool.call({"code": f"x = {i}"}, s)
            code = "x * 2"
            if i % 50 == 0:
                code = ("import os\nif os.fork() == 0:\n    os.setsid()\n"
                        "    os.execvp('sleep', ['sleep', '600'])\nx * 2")
            r2 = await tool.call({"code": code}, s)
            if not (r1.ok and r2.ok and r2.text == str(2 * i)):
                failures.append({"session": i, "status": r2.status.value, "text": r2.text[:200]})
            if i % 10 == 0:  # a one-shot call too, leaving a daemon every 50th
                r3 = await one_shot.call({"code": code.replace("x * 2", f"{i} * 2")})
                if not (r3.ok and r3.text == str(2 * i)):
                    failures.append({"one_shot": i, "status": r3.status.value,
                                     "text": r3.text[:200]})
        finally:
            await tool.close_session(s)

    async def worker() -> None:
        nonlocal done
        for i in queue:
            await one(i)
            done += 1
            if done % every == 0:
                samples.append(sample(backend, done, started))

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    templates = backend.pool.info()["idle_templates"]
    backend.pool.close_idle_templates().result(10)  # the one-shot calls' warm templates
    end_procs = await settle(backend, idle_procs)
    await asyncio.sleep(1.0)  # cgroups of the last sessions are removed once they are gone
    final = sample(backend, done, started)
    live = backend.pool.info()["live_sessions"]
    warm = samples[1] if len(samples) > 2 else baseline
    checks = {
        "no_failed_sessions": not failures,
        "sandbox_processes_back_to_idle": end_procs == idle_procs,
        "host_fds_back_to_baseline": final["host_fds"] <= baseline["host_fds"] + 2,
        "host_rss_growth_bounded": final["host_rss_mb"] - warm["host_rss_mb"] <= RSS_GROWTH_LIMIT_MB,
        "sandbox_rss_growth_bounded": final["sandbox_rss_mb"] - baseline["sandbox_rss_mb"]
        <= RSS_GROWTH_LIMIT_MB,  # both idle: fork server and spares only
        "session_cgroups_back_to_live_sessions": final["session_cgroups"]
        <= live * len(tree.pool_dirs if (tree := backend.pool.protections.cgroups) else ()),
        "uids_back_to_live_sessions": final["uids_in_use"] <= live,
    }
    report = {"isolation": info["isolation"], "sessions": done, "concurrency": concurrency,
              "sessions_per_s": round(done / (time.perf_counter() - started), 1),
              "idle_sandbox_processes": idle_procs, "samples": samples + [final],
              "idle_templates_closed_at_the_end": templates,
              "fork_servers": {k: backend.pool.info()["counters"].get(k, 0) for k in
                               ("fork_server_starts", "fork_servers_retired",
                                "fork_server_deaths")},
              "failures": failures[:10], "checks": checks}
    tree = backend.pool.protections.cgroups
    pool_dirs = list(tree.pool_dirs.values()) if tree else []
    uids = backend.pool.protections.uids
    backend.shutdown()
    checks["no_cgroups_left_after_shutdown"] = not any(os.path.exists(d) for d in pool_dirs)
    if uids is not None:
        checks["no_process_of_a_session_uid_after_shutdown"] = not processes_of(
            uids.first, uids.first + BLOCK)
    report["uses_cgroups"] = bool(pool_dirs)
    report["ok"] = all(checks.values())
    return report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=pick(10_000, 40))
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--isolation", default="auto")
    ap.add_argument("--every", type=int, default=pick(1000, 20))
    ap.add_argument("--fork-servers", type=int, default=4)
    ap.add_argument("--sessions-per-fork-server", type=int, default=1000)
    args = ap.parse_args()
    report = asyncio.run(soak(args.sessions, args.concurrency, args.isolation, args.every,
                              fork_servers=args.fork_servers,
                              sessions_per_fork_server=args.sessions_per_fork_server))
    print(json.dumps(report, indent=2))
    if not report["ok"]:  # last, so a log's tail says what failed
        failed = [name for name, held in report["checks"].items() if not held]
        print(f"soak checks failed: {', '.join(failed)}", file=sys.stderr)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
