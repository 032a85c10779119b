"""Issue 29, item 2 (host side): no session can hurt another, nor run between its calls.

* a flooding group of sessions (threads writing valid result frames, the nonce read off the
  interpreter's own frame) leaves a bystander's p50 latency within 2x of its idle p50,
  measured in the same test (a ratio, not a timing);
* a session that forks continuously (short-lived children writing time stamps) writes no
  stamp between its calls: the session is frozen while its process list is read;
* a new pool's first batch of episodes already spreads over its fork servers' hash secrets.

Real sandbox processes only.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import os
import statistics
import threading
import time

import pytest

from tests.sandbox_helpers import (backend, backend_or_skip, call, close_session, NAMESPACE_MODES,
                                   open_session, session_of)
from tir_envs.tools.base import Status
from tir_envs.tools.python import LocalBackend, PythonTool


def first_namespace_backend() -> LocalBackend:
    for mode in NAMESPACE_MODES:
        if not isinstance(backend(mode), str):
            return backend(mode)
    return backend_or_skip(NAMESPACE_MODES[0])


def needs(b: LocalBackend, mechanism: str) -> None:
    info = b.pool.info()
    if not info[mechanism]:
        pytest.skip(f"{mechanism} not available on this machine: "
                    f"{info['degraded'].get(mechanism)}")


# Finds the nonce of the running request on the interpreter's stack, then floods fd 3 (the
# session's socket) from four threads with valid result frames for it, each as large as the
# host accepts (about 160 KB at the default output limit), as the attack did: the cell
# benchmarks/perf/sandbox.py's flood_bystander runs too.
from tir_envs.bench.perf.sandbox import FLOOD  # noqa: E402


def latencies(tool: PythonTool, session, seconds: float) -> list[float]:
    """``1 + 1`` in ``session`` one call after another for ``seconds``: each call's time."""
    times = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        r = call(tool, "1 + 1", session)
        times.append(time.perf_counter() - t0)
        assert r.text == "2", r.text
    return times


def _flooded_and_idle(b: LocalBackend) -> tuple[list, list, collections.Counter]:
    """Six sessions flood the host with valid frames, each flooding call ending at its 1 s
    deadline and the next one starting at once (in a new session: the host killed the
    last).  Past its frame budget the host reads no more of a call (``killed``, never
    ``infra_error``), so the reactor thread reads a bounded amount per call.  The
    bystander's p50 while flooded stays within 2x of its p50 idle, each over 4 alternating
    phases (idle 1.5 s, flooded 3 s: each flooded phase spans two or three whole flooding
    calls of each flooder, restarts included, the six out of step; a phase starts once no
    flooding call of the other kind is in flight), so a change of the machine's load from
    other work shifts both alike; several hundred calls each."""
    tool = PythonTool(backend=b)
    flooders = PythonTool(backend=b, timeout_s=1)
    bystander = open_session(tool)
    statuses: collections.Counter = collections.Counter()
    lock = threading.Condition()
    go, stop = threading.Event(), threading.Event()
    in_flight = [0]

    def flooder(offset: float) -> None:
        with session_of(flooders) as s:
            while go.wait() and not stop.is_set():
                with lock:
                    in_flight[0] += 1
                time.sleep(offset)  # the six out of step: their calls end spread over time
                status = call(flooders, FLOOD, s).status
                with lock:
                    in_flight[0] -= 1
                    statuses[status] += 1
                    lock.notify_all()

    def quiet() -> None:
        with lock:
            assert lock.wait_for(lambda: in_flight[0] == 0, timeout=120)

    idle, flood = [], []
    try:
        latencies(tool, bystander, 0.3)  # warm
        with cf.ThreadPoolExecutor(6) as ex:
            futures = [ex.submit(flooder, i / 6) for i in range(6)]
            for _ in range(4):
                go.clear()
                quiet()
                idle += latencies(tool, bystander, 1.5)
                go.set()
                with lock:
                    assert lock.wait_for(lambda: in_flight[0] == 6, timeout=120)
                flood += latencies(tool, bystander, 3.0)
            stop.set()
            go.set()
            for fut in futures:
                fut.result(timeout=120)
        return idle, flood, statuses
    finally:
        stop.set()
        go.set()
        close_session(tool, bystander)


def test_a_flooding_group_leaves_a_bystander_within_2x_of_its_idle_latency():
    """What the host guarantees (every flooding call ``killed`` past its budget, counted) is
    checked on every measurement; the latency ratio is a measurement on a shared machine, so
    the best of up to three is held to 2x (another job's burst in one flooded phase is not
    the flood's doing; a host that lets floods through fails all three, as the old host did
    at 3-7x)."""
    b = first_namespace_backend()
    ratios = []
    for _ in range(3):
        over_before = b.pool.info()["counters"].get("calls_over_budget", 0)
        idle, flood, statuses = _flooded_and_idle(b)
        p50_idle, p50_flood = statistics.median(idle), statistics.median(flood)
        print(f"bystander p50 idle {p50_idle * 1000:.2f} ms, flooded {p50_flood * 1000:.2f} ms "
              f"(ratio {p50_flood / p50_idle:.2f}, {len(idle)} and {len(flood)} calls); "
              f"flooding calls {dict(statuses)}")
        assert len(idle) >= 100 and len(flood) >= 100, (len(idle), len(flood))
        assert set(statuses) == {Status.KILLED}, statuses
        over = b.pool.info()["counters"].get("calls_over_budget", 0) - over_before
        assert over >= sum(statuses.values()), (over, dict(statuses))
        ratios.append(p50_flood / p50_idle)
        if ratios[-1] <= 2:
            return
    pytest.fail(f"a flooded bystander's p50 was {min(ratios):.2f}x its idle p50 at best "
                f"(measurements {[round(r, 2) for r in ratios]}; at most 2x)")


# ------------------------------------------------------------------ between calls
# A fork chain: each process appends a time stamp, forks its successor and exits, so the
# session's process list changes all the time (the interpreter, pid 1 of the session's pid
# namespace, ignores SIGCHLD: the orphans are reaped at once and never fill pids.max).
STAMPER = """
import os, signal, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
fd = os.open('/tmp/stamps', os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
if os.fork() == 0:
    while True:
        os.write(fd, b'%.6f\\n' % time.time())
        if os.fork() != 0:
            os._exit(0)
time.sleep(0.2)
print('started')
"""


def count_stamps(gaps: list[tuple[float, float]]) -> str:
    """A cell printing how many stamps there are, then how many fall inside each gap."""
    return (f"gaps = {gaps!r}\n"
            "stamps = [float(x) for x in open('/tmp/stamps').read().split()]\n"
            "print(len(stamps), *(sum(lo < t < hi for t in stamps) for lo, hi in gaps))")


@pytest.mark.parametrize("mode", NAMESPACE_MODES)
def test_a_session_that_forks_continuously_writes_nothing_between_calls(mode):
    """Eight idle gaps of 0.4 s after calls that each let the stamper run for 0.1 s: many
    stamps are written during the calls, none inside a gap (host clock: after one call
    returned, before the next was sent).  The one-signal stop let 6-8 of 8 gaps through."""
    b = backend_or_skip(mode)
    needs(b, "freezer")
    tool = PythonTool(backend=b)
    with session_of(tool) as s:
        assert call(tool, STAMPER, s).text == "started"
        gaps = []
        for _ in range(8):
            ended = time.time()
            time.sleep(0.4)
            started = time.time()
            gaps.append((ended, started))
            assert call(tool, "import time; time.sleep(0.1)", s).status == Status.OK
        ended = time.time()
        time.sleep(0.4)
        gaps.append((ended, time.time()))
        # the cell counts (its clock is the host's): the stamps may be too many to print
        text = call(tool, count_stamps(gaps), s).text
        total, *inside = (int(x) for x in text.split())
        assert total >= 10, f"the stamper hardly ran: {total} stamps"
        assert not any(inside), {i: n for i, n in enumerate(inside) if n}


# ------------------------------------------------------------------ hash secrets at start
def test_a_new_pools_first_batch_spreads_over_its_fork_servers():
    """A pool that has just been created: its first 16 episodes, opened together, read at
    least 3 distinct string-hash secrets and none in more than 11 of them (70%).

    Not flaky: the pool hands out no session until its 4 servers serve, each open draws its
    server uniformly among them and takes one of its spares (spread evenly, 4 each), another
    server's only when the drawn one has none, so an episode lands on a given server with
    probability p <= 1/4 + P(its spares ran out) ~ 0.3 at worst.  P(fewer than 3 distinct)
    <= C(4, 2) * 0.6^16 = 1.7e-3 at that worst bound (3.7e-4 at p = 1/4), P(some server over
    11 of 16) <= 4 * P(Binomial(16, 0.3) >= 12) = 7e-4.  The old pool (ready with its first
    server, every initial spare from it) gives all 16 one secret."""
    mode = next((m for m in NAMESPACE_MODES if not isinstance(backend(m), str)), "auto")
    b = LocalBackend(isolation=mode, spares=16, fork_servers=4, disk_mb=19 + os.getpid() % 5)
    tool = PythonTool(backend=b)
    try:
        sessions = []
        with cf.ThreadPoolExecutor(16) as ex:
            sessions = list(ex.map(lambda _: open_session(tool), range(16)))
        texts = [call(tool, "hash('tir')", s).text for s in sessions]
        for s in sessions:
            close_session(tool, s)
        counts = collections.Counter(texts)
        assert len(counts) >= 3 and max(counts.values()) <= 11, counts
    finally:
        b.shutdown()
