"""What several fork servers per pool cost (one string-hash secret each), as JSON.

For ``fork_servers`` K = 1 and K = 4, in alternating rounds in one process (so both see the
same load), a fresh pool without spares is started and measured:

* ``first_ready_s``: until the first session can be opened (``wait_ready``: since issue 29
  the pool serves once its K servers all do; the first starts alone, the others together);
* ``all_ready_s``: until K servers serve;
* ``cpu_s_per_server``: CPU seconds of the fork server processes (the preload imports;
  under bwrap the ``bwrap`` parent too), per server, read from ``/proc`` once all serve
  (one session was forked and closed on the way, a few ms);
* ``rss_mb`` / ``pss_mb`` of the whole sandbox tree (the servers only: no spares), and per
  server.

Usage: ``python benchmarks/perf/sandbox_fork_servers.py [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tir_envs.bench.perf.quick import pick  # noqa: E402
from tir_envs.bench.perf.sandbox_soak import _descendants, _proc_table  # noqa: E402

from tir_envs.tools.python import LocalBackend  # noqa: E402


def pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
    except (OSError, StopIteration):
        return 0


def measure(k: int, disk_mb: int) -> dict:
    backend = LocalBackend(spares=0, fork_servers=k, disk_mb=disk_mb)
    start = time.perf_counter()
    backend.pool.wait_ready(timeout=300)
    first = time.perf_counter() - start
    info = backend.pool.wait_all_servers(timeout=300)
    every = time.perf_counter() - start
    time.sleep(0.5)  # the session forked by wait_ready is gone
    table = _proc_table()
    procs = set().union(*(_descendants(s["pid"], table) for s in info["fork_servers"]))
    ticks = sum(table[p][2] for p in procs) / os.sysconf("SC_CLK_TCK")
    rss = sum(table[p][1] for p in procs) / 1024
    pss = sum(pss_kb(p) for p in procs) / 1024
    backend.shutdown()
    return {"first_ready_s": round(first, 3), "all_ready_s": round(every, 3),
            "processes": len(procs), "cpu_s_per_server": round(ticks / k, 3),
            "rss_mb": round(rss, 1), "pss_mb": round(pss, 1),
            "rss_mb_per_server": round(rss / k, 1), "pss_mb_per_server": round(pss / k, 1)}


def main() -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=pick(3, 1))
    args = ap.parse_args()
    runs: dict[int, list[dict]] = {1: [], 4: []}
    load = [os.getloadavg()[0]]
    for r in range(args.rounds):
        for k in (1, 4) if r % 2 == 0 else (4, 1):
            runs[k].append(measure(k, disk_mb=60 + r))
        load.append(os.getloadavg()[0])
    out = {"loadavg_1m": [round(x, 2) for x in load], "cpus": os.cpu_count()}
    for k, rs in runs.items():
        out[f"fork_servers_{k}"] = {key: statistics.median(x[key] for x in rs)
                                    for key in rs[0]}
        out[f"fork_servers_{k}"]["rounds"] = rs
    return out


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
