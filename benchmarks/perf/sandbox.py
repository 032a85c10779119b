"""Python sandbox speed, as JSON, against a subprocess-per-call baseline in the same run.

* ``latency_ms``: p50/p99 of ``print(1)`` in one warm session through ``PythonTool.call``
  (the whole path: tool, pool, reactor thread, the sandboxed interpreter and back), next to
  ``python -c "print(1)"`` started per call (the baseline: a bare interpreter, the system's
  ``python3`` where there is one, see ``system_python``; its path is ``baseline_python``), and
  the same with the sandbox's scientific imports in this venv's interpreter (what a stateless
  executor pays to have sympy at hand).
* ``throughput``: ``print(1)`` runs per second with 1, 16, 64 and 256 sessions running
  concurrently from one event loop, each level measured right next to the baseline (the
  same number of concurrent ``python -c`` subprocesses), and the ratio.
* ``stateless``: one-shot calls (``stateful=False``, the ToRL/ZeroTIR executors: a fresh
  interpreter state per call, nothing left running) at 1, 16 and 64 concurrent calls, each
  level right next to the same number of concurrent ``python -c`` subprocesses and to the
  *fork-and-exit floor*: a warm interpreter with the sandbox's preloads (GC frozen, heap on
  huge pages, as the fork server) forking children that exit at once, with as many in
  flight as the level (``floor_runs_per_s``; ``floor_ratio`` is floor / sandbox).
* ``session_open_ms``: opening a session when no warm spare is left (fork + namespaces).
* ``flood_bystander``: a bystander session's ``print(1)`` p50 while idle and while six
  other sessions flood the host with valid result frames from threads (each flooding call
  ending at its 1 s deadline, the next starting at once), in three alternating phases, and
  the ratio (issue 29: at most 2).
* ``cpu_ms_per_call``: the CPU each call costs, the host process (``getrusage``) plus every
  process of the sandbox (``/proc``, exited ones counted through their reaper), for stateful
  calls in 64 sessions and stateless calls at 1 and 64 concurrent, next to
  ``python -c "print(1)"`` measured the same way, and the floor's CPU per fork
  (``fork_exit_floor``, the parent and its children).  Unlike runs/s it barely moves with the
  load of other jobs on the machine; ``projected_runs_per_s_at_64`` is what the CPU allows on
  this machine's cores.
* ``peers``: the field's one-shot executors, each ``print(1)`` call checked to print ``1``
  (a peer whose calls fail is reported as failing, never as fast): ``subprocess``, a fresh
  ``python3 -c`` per call (ToRL/ZeroTIR-style executors); ``firejail_code_r1``, a fresh
  ``firejail`` per call with code-r1's flags (``--private --profile=pip`` and its default
  ``--timeout`` of 30 s, which costs ~2 s of wall time per call: firejail then polls its child
  once a second); ``firejail_verl_tool``, VerlTool's ``python_code`` tool's flags
  (``--noprofile``, its minimal environment).  All run the system's ``python3`` (one that a
  ``--private`` home does not hide), so no peer pays the start-up of this checkout's venv.
  At 1, 16 and 64 concurrent calls each peer's runs/s is measured right after our stateless
  calls at the same level; then CPU ms per call at 16 concurrent, each peer next to ours,
  the way ``cpu_ms_per_call`` counts it.  ``stateless_over_fastest_peer``: per level, our
  runs/s over the fastest working peer's (each against the stateless run beside it).  A peer
  whose program is absent (firejail is not installed by ``make``) is ``{"installed": false}``.

Goals (issues 21 and 29): stateful p50 <= 0.5 ms and >= 3000 runs/s at 64 sessions;
stateless >= 3x ``python -c`` at 1, 16 and 64, >= 2x the fastest installed peer at each
level (``null`` when an installed peer failed: not measured), and within 1.5x of the
fork-and-exit floor (runs/s at each level, and CPU per call at 64); a flooded bystander's
p50 within 2x of its idle p50.
Usage: ``python benchmarks/perf/sandbox.py [--quick]``.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tir_envs.bench.perf.quick import QUICK, pick  # noqa: E402

from tir_envs.bench.perf.sandbox_soak import tree_cpu_s  # noqa: E402
from tir_envs.tools.python import LocalBackend, PythonTool  # noqa: E402

CODE = "print(1)"
LEVELS = (1, 16, 64, 256)
STATELESS_LEVELS = (1, 16, 64)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def system_python() -> str:
    """A bare ``python3``: the system's, outside any venv and home directory (a venv's
    interpreter with this checkout's editable install imports twice the modules at start,
    22-27 ms of CPU against 9-11 here, which would flatter every ratio to it; ``--private``
    hides homes from the firejail peers), else ours."""
    return shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or sys.executable


async def subprocess_run(code: str, python: str | None = None) -> None:
    """``python -c code`` in a fresh process (default: the bare ``system_python()``)."""
    proc = await asyncio.create_subprocess_exec(
        python or system_python(), "-c", code, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL)
    await proc.communicate()


async def latency(tool: PythonTool, n: int) -> dict:
    session = await tool.open_session()
    for _ in range(50):
        await tool.call({"code": CODE}, session)
    sandbox = []
    for _ in range(n):
        t = time.perf_counter()
        await tool.call({"code": CODE}, session)
        sandbox.append(1000 * (time.perf_counter() - t))
    await tool.close_session(session)
    base = []
    for _ in range(max(20, n // 50)):
        t = time.perf_counter()
        await subprocess_run(CODE)
        base.append(1000 * (time.perf_counter() - t))
    imports = []
    for _ in range(3):
        t = time.perf_counter()
        await subprocess_run("import numpy, sympy\nprint(1)", sys.executable)
        imports.append(1000 * (time.perf_counter() - t))
    p50, bp50 = statistics.median(sandbox), statistics.median(base)
    return {"sandbox_p50": round(p50, 3), "sandbox_p99": round(pct(sandbox, 0.99), 3),
            "baseline_python_c_p50": round(bp50, 2), "baseline_python_c_p99": round(pct(base, 0.99), 2),
            "baseline_with_numpy_sympy_p50": round(statistics.median(imports), 1),
            "speedup_p50": round(bp50 / p50, 1), "samples": n}


async def sandbox_rate(tool: PythonTool, sessions: int, seconds: float) -> float:
    opened = await asyncio.gather(*(tool.open_session() for _ in range(sessions)))
    for s in opened:
        await tool.call({"code": CODE}, s)
    stop = time.perf_counter() + seconds
    done = 0

    async def loop(s):
        nonlocal done
        while time.perf_counter() < stop:
            r = await tool.call({"code": CODE}, s)
            assert r.ok, r.text
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(loop(s) for s in opened))
    rate = done / (time.perf_counter() - start)
    await asyncio.gather(*(tool.close_session(s) for s in opened))
    return rate


async def calls_per_s(call, concurrency: int, seconds: float) -> tuple[float, int, int]:
    """``concurrency`` loops awaiting ``call()`` (True: it did its job) for ``seconds``:
    successful calls per second, calls made, calls failed."""
    stop = time.perf_counter() + seconds
    calls = failed = 0

    async def loop():
        nonlocal calls, failed
        while time.perf_counter() < stop:
            ok = await call()
            calls, failed = calls + 1, failed + (not ok)

    start = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(concurrency)))
    return (calls - failed) / (time.perf_counter() - start), calls, failed


async def baseline_rate(concurrency: int, seconds: float) -> float:
    async def one() -> bool:
        await subprocess_run(CODE)
        return True

    return (await calls_per_s(one, concurrency, seconds))[0]


async def throughput(tool: PythonTool, seconds: float, levels=LEVELS, rate=None) -> dict:
    """Runs/s of ``rate(tool, level, seconds)`` next to ``python -c`` at each level."""
    out = {}
    for level in levels:
        sb = await (rate or sandbox_rate)(tool, level, seconds)
        base = await baseline_rate(level, seconds)
        out[str(level)] = {"sandbox_runs_per_s": round(sb, 1),
                           "baseline_runs_per_s": round(base, 1),
                           "ratio": round(sb / base, 1)}
    return out


async def stateless_rate(tool: PythonTool, concurrency: int, seconds: float) -> float:
    async def one() -> bool:
        r = await tool.call({"code": CODE})
        assert r.ok, r.text
        return True

    return (await calls_per_s(one, concurrency, seconds))[0]


FLOOR = r"""
import gc, importlib, json, os, resource, sys, time
from tir_envs.tools.python.sandbox import jail
args = json.loads(sys.argv[1])
for name in args["preload"]:
    try:
        importlib.import_module(name)
    except Exception:
        pass
gc.collect(); gc.freeze(); jail.collapse_huge_pages()
out = {}
for level in args["levels"]:
    r0, c0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    done, live, start = 0, 0, time.perf_counter()
    stop = start + args["seconds"]
    while time.perf_counter() < stop or live:
        while live < level and time.perf_counter() < stop:
            if jail.bare_fork() == 0:
                os._exit(0)
            live += 1
        os.wait()
        live, done = live - 1, done + 1
    wall = time.perf_counter() - start
    r1, c1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime for a, b in ((r0, r1), (c0, c1)))
    out[str(level)] = {"runs_per_s": done / wall, "cpu_ms": 1000 * cpu / done}
print(json.dumps(out))
"""


def fork_floor(preload: tuple[str, ...], levels, seconds: float) -> dict:
    """The fork-and-exit floor (see the module docstring), in a process of its own."""
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", FLOOR, json.dumps(
        {"preload": list(preload), "levels": list(levels), "seconds": seconds})],
        capture_output=True, text=True, env=env, check=True).stdout
    return json.loads(out)


async def stateless_vs_floor(tool: PythonTool, preload: tuple[str, ...], seconds: float) -> dict:
    """Stateless runs/s at each level next to ``python -c`` and the fork-and-exit floor."""
    out = await throughput(tool, seconds, STATELESS_LEVELS, stateless_rate)
    for level in STATELESS_LEVELS:
        floor = await asyncio.to_thread(fork_floor, preload, [level], seconds)
        row = out[str(level)]
        row["floor_runs_per_s"] = round(floor[str(level)]["runs_per_s"], 1)
        row["floor_ratio"] = round(row["floor_runs_per_s"] / row["sandbox_runs_per_s"], 2)
    return out


async def open_cost(tool: PythonTool, n: int) -> float:
    """Opening ``n`` sessions at once (far beyond the spares): ms per session."""
    start = time.perf_counter()
    sessions = await asyncio.gather(*(tool.open_session() for _ in range(n)))
    per = 1000 * (time.perf_counter() - start) / n
    await asyncio.gather(*(tool.close_session(s) for s in sessions))
    return per


# Four threads write valid result frames (the nonce read off the interpreter's own stack),
# each as large as the host accepts, to the session's socket (tests/test_sandbox_neighbours).
FLOOD = """
import os, sys, threading, time
proto = sys.modules['sandbox.protocol']
f = sys._getframe()
while f is not None and 'nonce' not in f.f_locals:
    f = f.f_back
text = '\\U0001F600' * 8000
frame = proto.encode_result(f.f_locals['nonce'], {'status': 'error', 'stdout': text,
                            'stderr': text, 'value': text, 'error': text,
                            'error_last_line': text})
def flood():
    while True:
        try:
            os.write(3, frame)
        except OSError:
            return
for _ in range(4):
    threading.Thread(target=flood, daemon=True).start()
time.sleep(5)
"""


async def flood_bystander(backend: LocalBackend, n: int, flooders: int = 6) -> dict:
    """A bystander's ``print(1)`` p50, idle and while ``flooders`` sessions flood."""
    tool = PythonTool(backend=backend)
    flooding = PythonTool(backend=backend, timeout_s=1)
    bystander = await tool.open_session()
    calls = 0

    async def timed(k: int) -> list[float]:
        out = []
        for _ in range(k):
            t = time.perf_counter()
            await tool.call({"code": CODE}, bystander)
            out.append(1000 * (time.perf_counter() - t))
        return out

    async def flooder(stop: asyncio.Event) -> None:
        nonlocal calls
        s = await flooding.open_session()
        while not stop.is_set():
            await flooding.call({"code": FLOOD}, s)
            calls += 1
        await flooding.close_session(s)

    await timed(50)  # warm
    idle, flood = [], []
    for _ in range(3):
        idle += await timed(n)
        stop = asyncio.Event()
        tasks = [asyncio.create_task(flooder(stop)) for _ in range(flooders)]
        await asyncio.sleep(0.5)  # every flooder's first call under way
        flood += await timed(n)
        stop.set()
        await asyncio.gather(*tasks)
    await tool.close_session(bystander)
    p_idle, p_flood = statistics.median(idle), statistics.median(flood)
    return {"idle_p50_ms": round(p_idle, 3), "flooded_p50_ms": round(p_flood, 3),
            "ratio": round(p_flood / p_idle, 2), "flooding_calls": calls,
            "samples_each": len(idle)}


def _cpu_now() -> float:
    """CPU seconds of this process (all its threads) and of everything it started: live
    descendants from ``/proc``, reaped children (``python -c``) from ``getrusage``."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
            + tree_cpu_s(os.getpid()))


async def _cpu_ms(calls: int, concurrency: int, call) -> float:
    """CPU ms per call of ``concurrency`` loops making ``calls`` calls in all."""
    per = max(1, calls // concurrency)

    async def loop(i: int):
        for _ in range(per):
            await call(i)

    start = _cpu_now()
    await asyncio.gather(*(loop(i) for i in range(concurrency)))
    return round(1000 * (_cpu_now() - start) / (per * concurrency), 3)


async def cpu_per_call(tool: PythonTool, stateless: PythonTool, calls: int,
                       preload: tuple[str, ...] = ()) -> dict:
    async def one_shot(_):
        assert (await stateless.call({"code": CODE})).ok

    sessions = await asyncio.gather(*(tool.open_session() for _ in range(64)))

    async def stateful(i):
        assert (await tool.call({"code": CODE}, sessions[i])).ok

    await asyncio.gather(*(stateful(i) for i in range(64)), *(one_shot(i) for i in range(64)))
    out = {"stateful_64": await _cpu_ms(4 * calls, 64, stateful),
           "stateless_64": await _cpu_ms(calls, 64, one_shot),
           "stateless_1": await _cpu_ms(calls // 4, 1, one_shot),
           "python_c": await _cpu_ms(max(16, calls // 20), 16,
                                     lambda _: subprocess_run(CODE))}
    floor = await asyncio.to_thread(fork_floor, preload, [64], 1.0 if calls < 1000 else 3.0)
    out["fork_exit_floor"] = round(floor["64"]["cpu_ms"], 3)
    out["stateless_64_over_floor"] = round(out["stateless_64"] / out["fork_exit_floor"], 2)
    await asyncio.gather(*(tool.close_session(s) for s in sessions))
    cores = os.cpu_count() or 1
    out["projected_runs_per_s_at_64"] = {
        k: round(1000 * cores / out[k]) for k in ("stateful_64", "stateless_64")}
    return out


# --- peers: the field's one-shot executors ---------------------------------------------

# Firejail flags as the projects pass them (read in their sources, not copied):
# code-r1 verl/utils/reward_score/coder1/firejail_exec.py (443f8da) and VerlTool
# verl_tool/servers/tools/python_code.py (cd6dbcc); the code goes in as ``python3 -c``.
CODE_R1_FLAGS = ("--private", "--quiet", "--seccomp=socket", "--profile=pip",
                 "--rlimit-nproc=32", "--rlimit-nofile=32", "--rlimit-fsize=2m",
                 "--rlimit-as=4096m", "--timeout=00:00:30")
VERL_TOOL_FLAGS = ("--quiet", "--seccomp=socket", "--noprofile", "--rlimit-nproc=32",
                   "--rlimit-nofile=32", "--rlimit-fsize=2m", "--rlimit-as=1096m")
VERL_TOOL_ENV = ("PATH", "HOME", "USER", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TMPDIR")
PEER_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Peer:
    """One executor of the field: ``argv`` then the code, in ``env``."""

    name: str
    argv: tuple[str, ...]
    env: dict[str, str]

    @property
    def installed(self) -> bool:
        return shutil.which(self.argv[0]) is not None

    def command(self) -> str:
        return " ".join(self.argv + ("'print(1)'",))


def peers() -> list[Peer]:
    python = system_python()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    jail_env = {**env, "OPENBLAS_NUM_THREADS": "1"}
    verl_env = {k: env[k] for k in VERL_TOOL_ENV if k in env} | {"OPENBLAS_NUM_THREADS": "1"}
    return [Peer("subprocess", (python, "-c"), env),
            Peer("firejail_code_r1", ("firejail", *CODE_R1_FLAGS, python, "-c"), jail_env),
            Peer("firejail_verl_tool", ("firejail", *VERL_TOOL_FLAGS, python, "-c"), verl_env)]


async def peer_call(peer: Peer, code: str = CODE) -> bool:
    """One call of ``peer``; True only when it exited 0 having printed ``1``."""
    proc = await asyncio.create_subprocess_exec(
        *peer.argv, code, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        stdin=asyncio.subprocess.DEVNULL, env=peer.env)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), PEER_TIMEOUT_S)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        return False
    return proc.returncode == 0 and out.strip() == b"1"


async def peer_side_by_side(stateless: PythonTool, peer: Peer, seconds: float,
                            calls: int) -> dict:
    """``peer`` at each level right after our stateless calls, then CPU ms per call."""
    out: dict = {"installed": True, "command": peer.command(), "calls": 0, "failed_calls": 0}
    for level in STATELESS_LEVELS:
        ours = await stateless_rate(stateless, level, seconds)
        rate, made, failed = await calls_per_s(lambda: peer_call(peer), level, seconds)
        out["calls"], out["failed_calls"] = out["calls"] + made, out["failed_calls"] + failed
        out[str(level)] = {"runs_per_s": round(rate, 1), "stateless_runs_per_s": round(ours, 1),
                           "ratio": round(ours / rate, 1) if rate else None}

    async def one_shot(_):
        assert (await stateless.call({"code": CODE})).ok

    async def one_peer(_):
        ok = await peer_call(peer)
        out["calls"], out["failed_calls"] = out["calls"] + 1, out["failed_calls"] + (not ok)

    out["stateless_cpu_ms_per_call_16"] = await _cpu_ms(calls // 4, 16, one_shot)
    out["cpu_ms_per_call_16"] = await _cpu_ms(max(16, calls // 20), 16, one_peer)
    out["cpu_over_stateless_16"] = round(
        out["cpu_ms_per_call_16"] / out["stateless_cpu_ms_per_call_16"], 1)
    out["failing"] = out["failed_calls"] > 0
    return out


async def peers_vs_stateless(stateless: PythonTool, seconds: float, calls: int) -> dict:
    """Every peer side by side with our stateless calls; the ratio to the fastest."""
    out: dict = {"python": system_python()}
    for peer in peers():
        out[peer.name] = (await peer_side_by_side(stateless, peer, seconds, calls)
                          if peer.installed else {"installed": False})
    working = {name: row for name, row in out.items()
               if isinstance(row, dict) and row["installed"] and not row["failing"]}
    out["fastest_peer"], out["stateless_over_fastest_peer"] = {}, {}
    for level in map(str, STATELESS_LEVELS):
        name = max(working, key=lambda n: working[n][level]["runs_per_s"], default=None)
        out["fastest_peer"][level] = name
        out["stateless_over_fastest_peer"][level] = working[name][level]["ratio"] if name else None
    return out


def peer_goal(peers_out: dict) -> bool | None:
    """>= 2x the fastest peer at every level; None (not measured) when an installed peer
    failed or none works."""
    rows = [v for v in peers_out.values() if isinstance(v, dict) and "installed" in v]
    ratios = list(peers_out["stateless_over_fastest_peer"].values())
    if any(r["installed"] and r["failing"] for r in rows) or None in ratios:
        return None
    return all(r >= 2 for r in ratios)

async def main(quick: bool) -> dict:
    backend = LocalBackend()
    info = backend.pool.wait_all_servers(timeout=300)  # steady state: every fork server up
    tool = PythonTool(backend=backend)
    stateless = PythonTool(backend=backend, stateful=False)
    load_before = os.getloadavg()
    result = {
        "machine": {"cpus": os.cpu_count(), "loadavg_1m_before": round(load_before[0], 2),
                    "isolation": info["isolation"], "spares": info["config"]["spares"],
                    "fork_servers": len(info["fork_servers"]),
                    "baseline_python": system_python()},
        "latency_ms": await latency(tool, 500 if quick else 3000),
        "throughput": await throughput(tool, 1.0 if quick else 3.0),
        "stateless": await stateless_vs_floor(stateless, backend.config.preload,
                                              1.0 if quick else 3.0),
        "peers": await peers_vs_stateless(stateless, 1.0 if quick else 3.0,
                                          640 if quick else 2560),
        "session_open_ms": round(await open_cost(tool, 64), 2),
        "flood_bystander": await flood_bystander(backend, 100 if quick else 300),
        "cpu_ms_per_call": await cpu_per_call(tool, stateless, 640 if quick else 2560,
                                              backend.config.preload),
    }
    result["machine"]["loadavg_1m_after"] = round(os.getloadavg()[0], 2)
    lat, thr, sl = result["latency_ms"], result["throughput"], result["stateless"]
    result["goals"] = {
        "stateful_p50_le_0_5ms": lat["sandbox_p50"] <= 0.5,
        "stateful_ge_3000_runs_per_s_at_64": thr["64"]["sandbox_runs_per_s"] >= 3000,
        "stateless_ge_3x_python_c_at_1_16_64": all(v["ratio"] >= 3 for v in sl.values()),
        "stateless_ge_2x_fastest_peer_at_1_16_64": peer_goal(result["peers"]),
        "stateless_within_1_5x_floor_at_1_16_64": all(v["floor_ratio"] <= 1.5
                                                       for v in sl.values()),
        "stateless_cpu_within_1_5x_floor_at_64":
            result["cpu_ms_per_call"]["stateless_64_over_floor"] <= 1.5,
        "flooded_bystander_within_2x": result["flood_bystander"]["ratio"] <= 2,
    }
    backend.shutdown()
    return result


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main("--quick" in sys.argv or QUICK)), indent=2))
