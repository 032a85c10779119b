"""A pool of grader processes with hard timeouts, safe to use from threads and asyncio.

Symbolic equivalence can run for ever (``9^{9^{9^9}}``) or eat all memory (huge matrices).
Each check therefore runs in a worker process; the caller waits at most ``timeout_s`` and then
kills the worker (SIGKILL) and starts a fresh one, so a wedged check costs one timeout, never a
hung trainer.  Workers cap their own address space, so a runaway allocation becomes a
``MemoryError`` inside the worker instead of an OOM kill of the machine.

Workers are plain subprocesses (``tir_envs.rewards.math.worker``), not ``multiprocessing``
children: they never re-run the caller's main script nor inherit its threads and locks.  A
replacement warms up in the background (about a second) while the other workers keep serving.
Verdicts are cached (timeouts too, so a pathological answer costs its timeout once), and the
common easy cases (equal strings, plain numbers) are settled in the caller without a worker.

Before either, each pair is prepared in the caller: a ``FinalAnswer`` with several boxes becomes
the list they form when the gold is a list/set, and against any other gold each distinct box is
graded and all must be right (``extract.graded_texts``); both sides go through
``normalize.prepare_answer`` (code-style answers become LaTeX); and an answer that hedges
(``hedge.hedge_reason``: ``41 \\lor 42``, ``40 \\le x \\le 45``) is wrong without a check.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import concurrent.futures
import multiprocessing.util
import os
import pickle
import queue
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from typing import Iterable, Sequence

from tir_envs.rewards.math.extract import graded_texts, is_multi_valued
from tir_envs.rewards.math.hedge import read_pair
from tir_envs.rewards.math.normalize import DEFAULT_REL_TOL, prepare_answer, quick_verdict
from tir_envs.rewards.math.worker import read_message, write_message
from tir_envs.validation import check_positive_int, check_positive_number

# Statuses of a Grade.
QUICK = "quick"        # settled in the caller (no answer, equal strings, plain numbers)
OK = "ok"              # Math-Verify answered
TIMEOUT = "timeout"    # the worker ran past timeout_s and was killed
ERROR = "error"        # Math-Verify raised (includes MemoryError at the worker's memory cap)
CRASHED = "crashed"    # the worker died (killed by the OS, segfault)
TOO_LONG = "too_long"  # the prediction is longer than max_answer_chars; not checked

# More distinct boxes than this against a single value are wrong without a check: each box would
# cost a check, and no honest answer boxes that many spellings of one value.
MAX_BOXES = 8


@dataclass(frozen=True)
class Grade:
    """One verdict: ``correct``, how it was reached (``status``), and whether it was cached."""

    correct: bool
    status: str
    cached: bool = False
    seconds: float = 0.0
    detail: str = ""

    def __bool__(self) -> bool:
        return self.correct


# ---------------------------------------------------------------------------- workers
def _package_root() -> str:
    """The folder holding the ``tir_envs`` package, so the worker imports this very copy."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))


_WORKER_MAIN = "from tir_envs.rewards.math.worker import serve; serve(%d)"


class _Worker:
    """One grader subprocess and the parent's ends of its pipes."""

    def __init__(self, memory_mb: int | None):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (_package_root(), env.get("PYTHONPATH", "")) if p)
        self.process = subprocess.Popen(
            [sys.executable, "-c", _WORKER_MAIN % int(memory_mb or 0)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True,
            # its own session: a terminal's Ctrl-C goes to the caller, which stops the workers
            # (they exit when their stdin closes), not to each worker as a traceback
            start_new_session=True)
        self.out_fd = self.process.stdout.fileno()
        self._poller = select.poll()  # unlike select(), fine with descriptors above 1024
        self._poller.register(self.out_fd, select.POLLIN)
        self.ready = False

    def _poll(self, timeout_s: float) -> bool:
        return bool(self._poller.poll(max(timeout_s, 0.0) * 1000))

    def wait_ready(self, timeout_s: float) -> bool:
        if not self.ready:
            try:
                if self._poll(timeout_s):
                    self.ready = read_message(self.out_fd)[0] == "ready"
            except (EOFError, OSError, pickle.UnpicklingError):
                self.ready = False
        return self.ready

    def check(self, pred: str, gold: str, timeout_s: float,
              rel_tol: float) -> tuple[str, bool, str]:
        try:
            write_message(self.process.stdin, (pred, gold, rel_tol))
            if not self._poll(timeout_s):
                self.kill()
                return TIMEOUT, False, f"no verdict within {timeout_s:g}s; worker killed"
            return read_message(self.out_fd)
        except (EOFError, OSError, pickle.UnpicklingError) as exc:
            self.kill()
            return CRASHED, False, f"grader worker died ({type(exc).__name__})"

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def stop(self) -> None:
        """Ask the worker to exit; kill it if it does not."""
        try:
            write_message(self.process.stdin, None)
            self.process.wait(1)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
        self.kill()


class GraderPool:
    """``workers`` grader processes; ``grade``/``is_equivalent``/``grade_many``/``agrade``.

    ``timeout_s``: the most one check may take before its worker is killed (the answer counts as
    wrong, status ``timeout``).  ``memory_mb``: address space each worker may add to its start
    size.  ``cache_size``: verdicts remembered (LRU).  ``max_answer_chars``: longer predictions
    are not checked (wrong, status ``too_long``).  ``rel_tol``: how far a decimal may be from
    the gold, relative to it (default 1e-6; integers and exact forms compare exactly; see
    ``normalize.numbers_agree``).  Use as a context manager or call ``close``.
    """

    def __init__(self, workers: int = 2, timeout_s: float = 5.0, memory_mb: int | None = 1024,
                 cache_size: int = 65536, max_answer_chars: int = 4000,
                 startup_timeout_s: float = 120.0, rel_tol: float = DEFAULT_REL_TOL):
        check_positive_int(workers=workers)
        check_positive_number(timeout_s=timeout_s, unit="seconds")
        if not isinstance(rel_tol, (int, float)) or not 0 <= rel_tol < 1:
            raise ValueError(f"rel_tol must be a number in [0, 1) (e.g. 1e-6), got {rel_tol!r}")
        self.rel_tol = float(rel_tol)
        self.workers = workers
        self.timeout_s = float(timeout_s)
        self.memory_mb = memory_mb
        self.cache_size = cache_size
        self.max_answer_chars = max_answer_chars
        self.startup_timeout_s = startup_timeout_s
        self._pid = os.getpid()
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._cache: collections.OrderedDict[tuple[str, str], Grade] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._closed = False
        self._executor = concurrent.futures.ThreadPoolExecutor(workers, "tir-grader")
        self.stats = collections.Counter()
        for _ in range(workers):
            self._idle.put(_Worker(memory_mb))

    # -- public API ---------------------------------------------------------------
    def grade(self, pred: str | None, gold: str, timeout_s: float | None = None) -> Grade:
        """The verdict on ``pred`` against ``gold`` (``None`` pred: no answer, wrong)."""
        texts = graded_texts(pred, str(gold))
        if len(texts) > MAX_BOXES:
            return Grade(False, QUICK, detail=f"{len(texts)} different boxed answers: a hedge")
        grade = None
        for text in texts:  # several boxes: each must be right
            grade = self._grade_text(text, gold, timeout_s)
            if not grade.correct:
                break
        return grade  # type: ignore[return-value]

    def _grade_text(self, pred: str | None, gold: str, timeout_s: float | None) -> Grade:
        early = self._early(pred, gold)
        if isinstance(early, Grade):
            return early
        pred, gold = early
        start = time.perf_counter()
        status, correct, detail = self._check(pred, gold, timeout_s or self.timeout_s)
        grade = Grade(bool(correct), status, False, time.perf_counter() - start, detail)
        self._remember((pred, gold), grade)
        return grade

    def is_equivalent(self, pred: str | None, gold: str, timeout_s: float | None = None) -> bool:
        return self.grade(pred, gold, timeout_s).correct

    def grade_many(self, pairs: Iterable[tuple[str | None, str]],
                   timeout_s: float | None = None) -> list[Grade]:
        """Verdicts for many pairs, checked in parallel on all workers, in input order."""
        pairs = list(pairs)
        out: list[Grade | None] = [self._early_grade(p, g) for p, g in pairs]
        todo = [i for i, g in enumerate(out) if g is None]
        futures = [self._executor.submit(self.grade, *pairs[i], timeout_s) for i in todo]
        for i, fut in zip(todo, futures):
            out[i] = fut.result()
        return out  # type: ignore[return-value]

    async def agrade(self, pred: str | None, gold: str, timeout_s: float | None = None) -> Grade:
        """``grade`` for coroutines: the wait happens on the pool's threads, not the loop."""
        early = self._early_grade(pred, gold)
        if early is not None:
            return early
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.grade, pred, gold, timeout_s)

    def close(self) -> None:
        """Stop every worker (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        while True:
            try:
                self._idle.get_nowait().stop()
            except queue.Empty:
                break
        self._executor.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> "GraderPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- internals ----------------------------------------------------------------
    def _early_grade(self, pred: str | None, gold: str) -> Grade | None:
        texts = graded_texts(pred, str(gold))
        if len(texts) > MAX_BOXES:
            return Grade(False, QUICK, detail=f"{len(texts)} different boxed answers: a hedge")
        if len(texts) > 1:
            return None
        early = self._early(texts[0], gold)
        return early if isinstance(early, Grade) else None

    def _early(self, pred: str | None, gold: str) -> Grade | tuple[str, str]:
        """A verdict that needs no worker (no answer, too long, a hedge, easy, or cached), else
        the prepared pair for the worker.  ``pred`` is one of ``graded_texts``."""
        gold = str(gold)
        if pred is None or not pred.strip():
            return Grade(False, QUICK, detail="no answer")
        if len(pred) > self.max_answer_chars:
            return Grade(False, TOO_LONG, detail=f"answer longer than {self.max_answer_chars} "
                                                 "characters is not checked")
        pred, gold = prepare_answer(pred), prepare_answer(gold)
        pred, gold, hedge = read_pair(pred, gold, is_multi_valued(gold))
        if hedge:
            return Grade(False, QUICK, detail=hedge)
        verdict = quick_verdict(pred, gold, self.rel_tol)
        if verdict is not None:
            self.stats[QUICK] += 1
            return Grade(verdict, QUICK)
        with self._lock:
            hit = self._cache.get((pred, gold))
            if hit is not None:
                self._cache.move_to_end((pred, gold))
                self.stats["cache_hits"] += 1
                return replace(hit, cached=True)
        return pred, gold

    def _remember(self, key: tuple[str, str], grade: Grade) -> None:
        if grade.status == CRASHED:  # may be the machine's fault; try again next time
            return
        with self._lock:
            self._cache[key] = grade
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    def _check(self, pred: str, gold: str, timeout_s: float) -> tuple[str, bool, str]:
        if self._closed:
            raise RuntimeError("this GraderPool is closed; create a new one")
        if os.getpid() != self._pid:
            raise RuntimeError("a GraderPool cannot be used across fork(); create one in the "
                               "child process (default_pool() does this for you)")
        for _ in range(3):
            worker = self._take_worker()
            try:
                if not worker.alive or not worker.wait_ready(self.startup_timeout_s):
                    worker.kill()  # died while idle or never started: replace, try another
                    continue
                result = worker.check(pred, gold, timeout_s, self.rel_tol)
            finally:
                self._release(worker)
            self.stats[result[0]] += 1
            return result
        self.stats[CRASHED] += 1
        return CRASHED, False, "grader workers failed to start three times (see stderr)"

    def _take_worker(self) -> _Worker:
        """An idle worker, preferring one that is warm over a replacement still starting."""
        while True:
            try:
                worker = self._idle.get(timeout=0.5)
                break
            except queue.Empty:
                if self._closed:
                    raise RuntimeError("this GraderPool was closed while waiting for a worker")
        if not worker.alive:  # died while idle: start its replacement now
            worker.kill()
            worker = _Worker(self.memory_mb)
        if not worker.wait_ready(0):
            try:
                other = self._idle.get_nowait()
            except queue.Empty:
                return worker
            self._idle.put(worker)
            worker = other
        return worker

    def _release(self, worker: _Worker) -> None:
        """Return a worker to the idle queue, or a fresh one in place of a dead one."""
        if self._closed:
            worker.stop()
            return
        if not worker.alive:
            worker.kill()
            worker = _Worker(self.memory_mb)
        self._idle.put(worker)


# ---------------------------------------------------------------------------- default pool
_default: GraderPool | None = None
_default_lock = threading.Lock()


def default_pool() -> GraderPool:
    """The process-wide pool behind ``is_equivalent`` (2 workers, 5 s timeout), created on
    first use and closed at exit.  A forked child gets its own."""
    global _default
    with _default_lock:
        if _default is None or _default.closed or _default._pid != os.getpid():
            _default = GraderPool(workers=max(1, min(2, os.cpu_count() or 1)))
            atexit.register(_default.close)
            # multiprocessing children (e.g. gymnasium's AsyncVectorEnv workers) skip atexit
            # but run these finalizers: stop the workers there too, or they outlive their pipes
            multiprocessing.util.Finalize(None, _default.close, exitpriority=10)
        return _default


def is_equivalent(pred: str | None, gold: str, timeout_s: float | None = None) -> bool:
    """Whether ``pred`` and ``gold`` are the same answer (Math-Verify, in the default pool).

    Never hangs and never raises for strange input: a check past ``timeout_s`` (default 5 s)
    counts as not equivalent.
    """
    return default_pool().grade(pred, gold, timeout_s).correct


def grade_many(pairs: Sequence[tuple[str | None, str]]) -> list[Grade]:
    """``GraderPool.grade_many`` on the default pool."""
    return default_pool().grade_many(pairs)
