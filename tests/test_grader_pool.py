"""The grader pool: hard timeouts on pathological input, worker replacement, cache, and use from
threads and asyncio (no SIGALRM anywhere near the caller)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import pytest

from tir_envs.rewards.math import GraderPool
from tir_envs.rewards.math.pool import ERROR, OK, TIMEOUT, TOO_LONG

TOWER = "9^{9^{9^9}}"


@pytest.fixture(scope="module")
def pool():
    with GraderPool(workers=2, timeout_s=30) as p:
        p.grade_many([("(1,2)", "(2,1)"), ("x^2", "x*x")])  # both workers started
        yield p


def test_pathological_input_times_out_and_pool_recovers(pool):
    start = time.perf_counter()
    grade = pool.grade(TOWER, "1", timeout_s=2)
    elapsed = time.perf_counter() - start
    assert grade.status == TIMEOUT and not grade.correct
    assert elapsed < 60  # returned: the wedged worker was killed, not waited for
    # The replacement (or the other worker) serves the next symbolic check.
    after = pool.grade("\\left(1, \\frac{3}{2}\\right)", "(1, 3/2)")
    assert after.correct and after.status == OK
    # Timeouts are cached: the same pathological answer does not cost a second timeout.
    again = pool.grade(TOWER, "1", timeout_s=2)
    assert again.cached and again.status == TIMEOUT


def test_huge_matrix_power_neither_hangs_nor_crashes(pool):
    # Unbounded, SymPy would raise this matrix to the 10^9 with exact integers (hours, gigabytes).
    # A matrix gold: against "1" a matrix is refused before any worker (rewards.math.allowed).
    gold = "\\begin{pmatrix}1&0\\\\0&1\\end{pmatrix}"
    grade = pool.grade("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}^{1000000000}", gold, timeout_s=2)
    assert not grade.correct and grade.status in (TIMEOUT, ERROR, OK)
    assert pool.grade("\\begin{pmatrix}1\\\\2\\end{pmatrix}",
                      "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}").correct


def test_overlong_answer_is_refused_without_a_worker(pool):
    grade = pool.grade("+".join(f"x_{{{i}}}" for i in range(3000)), "1")
    assert grade.status == TOO_LONG and not grade.correct


def test_cache_hits(pool):
    first = pool.grade("\\sqrt{12}", "2\\sqrt{3}")
    second = pool.grade("\\sqrt{12}", "2\\sqrt{3}")
    assert first.correct and not first.cached
    assert second.correct and second.cached


def test_worker_killed_from_outside_is_replaced(pool):
    workers = list(pool._idle.queue)
    victims = [w.process.pid for w in workers]
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    for w in workers:  # dead for sure (a fixed sleep raced the kill on a loaded machine)
        w.process.wait(timeout=30)
    grades = [pool.grade(f"\\frac{{{n}}}{{\\sqrt{{4}}}}", f"{n}/2") for n in (3, 5, 7)]
    # Workers found dead while idle are replaced before the check: no verdict is lost.
    assert [(g.correct, g.status) for g in grades] == [(True, OK)] * 3
    assert not set(victims) & {w.process.pid for w in list(pool._idle.queue)}


def test_many_threads_at_once(pool):
    results: dict[int, bool] = {}

    def work(n: int) -> None:
        results[n] = pool.grade(f"({n}, \\sqrt{{{n * n}}})", f"({n},{n})").correct

    threads = [threading.Thread(target=work, args=(n,)) for n in range(2, 12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert results == {n: True for n in range(2, 12)}


def test_asyncio_gather_and_loop_stays_responsive(pool):
    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.05)
                ticks += 1

        task = asyncio.create_task(ticker())
        grades = await asyncio.gather(
            pool.agrade("9^{9^{9^{8}}}", "2", timeout_s=2),
            *(pool.agrade(f"\\frac{{{n}}}{{3}} + x", f"x + {n}/3") for n in range(1, 5)))
        task.cancel()
        return grades, ticks

    grades, ticks = asyncio.run(main())
    assert grades[0].status == TIMEOUT
    assert all(g.correct for g in grades[1:])
    assert ticks >= 10  # the loop kept running while a check was wedged for 2 s


def test_no_sigalrm_handler_left_in_the_caller(pool):
    before = signal.getsignal(signal.SIGALRM)
    pool.grade("\\frac{7}{\\sqrt{49}}", "1")
    assert signal.getsignal(signal.SIGALRM) == before


def test_bad_arguments_and_closed_pool():
    with pytest.raises(ValueError, match="workers"):
        GraderPool(workers=0)
    with pytest.raises(ValueError, match="timeout_s"):
        GraderPool(workers=1, timeout_s=0)
    p = GraderPool(workers=1)
    p.close()
    assert p.grade("1", "1").correct  # settled without a worker
    with pytest.raises(RuntimeError, match="closed"):
        p.grade("(1,2)", "(2,1)")
