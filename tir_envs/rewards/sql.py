"""Execution match for text-to-SQL, and the SQL environment's outcome reward.

``match(pred_sql, gold_sql, db)`` runs the prediction and the gold query on the **same engine**
(the one the policy queries: SQLite for a SQLite database unless ``engine="duckdb"`` was
chosen), each through the executor the ``<sql>`` tool uses, and compares the results by
Spider's execution-match convention, done as ``sql_compare`` describes:

* same number of columns and rows; columns may be permuted (one consistent mapping);
* rows as multisets (duplicates count, ``DISTINCT`` is never stripped), or, when the gold's
  *outermost* query has ``ORDER BY`` (found by the lexer: not one in a subquery, a string or a
  comment), in order, where rows tied on the ``ORDER BY`` keys may come in any order and,
  under ``LIMIT``, any of the tied rows may be the ones kept;
* values normalised, floats within a tolerance;
* both results empty: not yet a match (every query returning nothing would be one).  The
  prediction must also return the gold's rows on populated copies of the database, one of
  which gives the gold rows (``sql_witness``); where no copy can be built or none gives the
  gold a row, the pair is ``unwitnessed``: the reward's ``correct`` is ``None`` (ungradable,
  like a failing gold), never a match.

A prediction with more than one statement is refused by the executor, as are writes; a
prediction that fails, is refused, or runs past its time limit is a miss.  A gold query that
fails is not the policy's fault: ``GoldQueryError``.
"""

from __future__ import annotations

import copy
import functools
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from tir_envs.data.databases import task_database_path
from tir_envs.rewards.base import Reward, RewardResult
from tir_envs.rewards.sql_compare import GoldResult, TieGroup, normalize_rows
from tir_envs.rewards.sql_ordering import with_sort_keys
from tir_envs.rewards.sql_witness import witnesses
from tir_envs.tools.sql.database import (EngineSettings, SQLDatabase, check_engine,
                                         open_database)
from tir_envs.tools.sql.executor import run_query
from tir_envs.tools.sql.lexer import has_outer_order_by, strip_terminator
from tir_envs.tools.sql.result import QueryResult

if TYPE_CHECKING:
    from tir_envs.task import Task
    from tir_envs.trajectory import Trajectory

__all__ = ["GoldQueryError", "GoldResult", "MatchResult", "SQLReward", "execution_match",
           "gold_result", "match", "task_database"]

#: rows a gold result may have (a bigger one is a dataset problem: GoldQueryError)
MAX_GOLD_ROWS = 100_000


class GoldQueryError(RuntimeError):
    """The gold query failed on its engine: the dataset or database is broken."""


# --------------------------------------------------------------------------- gold side

def _run(db: SQLDatabase, sql: str, timeout_s: float, max_rows: int) -> QueryResult:
    """``sql`` through the tool's executor, on a pooled connection of ``db``."""
    con = db.acquire()
    try:
        return run_query(con, sql, timeout_s=timeout_s, max_rows=max_rows)
    finally:
        db.release(con)


def _gold_rows(db: SQLDatabase, sql: str, timeout_s: float) -> tuple[list[str], list[tuple]]:
    result = _run(db, sql, timeout_s, MAX_GOLD_ROWS)
    if not result.ok:
        raise RuntimeError(result.error)
    if result.more_rows:
        raise RuntimeError(f"the gold result has more than {MAX_GOLD_ROWS} rows")
    return result.columns, result.rows


def _runs(db: SQLDatabase, gold_sql: str, rows: list[tuple], width: int,
          timeout_s: float) -> tuple[TieGroup, ...] | None:
    """The tie structure of an ordered gold result, or ``None`` if it cannot be read."""
    rewrite = with_sort_keys(gold_sql)
    if rewrite is None:
        return None
    try:
        _, full = _gold_rows(db, rewrite.sql, timeout_s)
    except RuntimeError:  # the rewrite is best effort; fall back to strict order
        return None
    keys = rewrite.key_indices(width)
    if keys is None or not full or len(full[0]) <= max(keys):
        return None
    full = normalize_rows(full)
    limit = len(full) if rewrite.limit is None else min(rewrite.limit, len(full))
    groups: list[tuple[tuple, list[tuple]]] = []
    for row in full:
        key = tuple(row[k] for k in keys)
        if groups and groups[-1][0] == key:
            groups[-1][1].append(row[:width])
        else:
            groups.append((key, [row[:width]]))
    runs, left = [], limit
    for _, members in groups:
        if left <= 0:
            break
        taken = min(left, len(members))
        runs.append(TieGroup(taken, Counter(members)))
        left -= taken
    candidate = GoldResult(tuple(rows), width, True, tuple(runs))
    return candidate.runs if candidate._same(rows) else None


@functools.lru_cache(maxsize=8192)
def _gold_cached(db: SQLDatabase, gold_sql: str, timeout_s: float) -> GoldResult:
    try:
        columns, raw = _gold_rows(db, gold_sql, timeout_s)
    except RuntimeError as exc:
        raise GoldQueryError(f"the gold query failed on {db.path.name} ({db.engine_name}): "
                             f"{exc}\n  {gold_sql}") from exc
    rows = normalize_rows(raw)
    width = len(columns)
    ordered = has_outer_order_by(gold_sql)
    runs = _runs(db, gold_sql, rows, width, timeout_s) if ordered and rows else None
    return GoldResult(tuple(rows), width, ordered, runs)


def gold_result(gold_sql: str, db: "str | os.PathLike | SQLDatabase", timeout_s: float = 30.0,
                *, engine: str | None = None) -> GoldResult:
    """The gold query's normalised result on ``db``'s engine (cached per database and query)."""
    return _gold_cached(open_database(db, engine=engine), strip_terminator(gold_sql), timeout_s)


# --------------------------------------------------------------------------- matching

@dataclass
class MatchResult:
    """``status``: match | mismatch | error | timeout | refused | unwitnessed."""

    correct: bool
    status: str
    error: str | None = None
    pred_rows: int = 0
    gold_rows: int = 0
    details: dict[str, Any] = field(default_factory=dict)


def match(pred_sql: str, gold_sql: str, db: "str | os.PathLike | SQLDatabase", *,
          timeout_s: float = 30.0, gold_timeout_s: float = 30.0,
          engine: str | None = None) -> MatchResult:
    """Execution match with the reasons (module doc).  ``db``: a path (opened with ``engine``,
    ``None`` for its own dialect) or an ``SQLDatabase``; gold and prediction both run on it."""
    database = open_database(db, engine=engine)
    gold = gold_result(gold_sql, database, gold_timeout_s)
    # One row past the gold's count is enough to know a bigger result cannot match.
    result = _run(database, pred_sql, timeout_s, len(gold.rows) + 1)
    if not result.ok:
        return MatchResult(False, result.status, result.error, gold_rows=len(gold.rows))
    rows = normalize_rows(result.rows)
    ok = not result.more_rows and gold.matches(rows, len(result.columns))
    if ok and not gold.rows:
        return _empty_match(pred_sql, gold_sql, database, timeout_s)
    return MatchResult(ok, "match" if ok else "mismatch", None, len(rows), len(gold.rows))


def _empty_match(pred_sql: str, gold_sql: str, database: SQLDatabase,
                 timeout_s: float) -> MatchResult:
    """Both results empty: the verdict of the witness copies (module doc)."""
    found = witnesses(str(database.path), strip_terminator(gold_sql))
    verdict = None if found is None else found.check(pred_sql, strip_terminator(gold_sql),
                                                      timeout_s)
    if verdict is None:
        return MatchResult(False, "unwitnessed", "the gold result is empty and no populated "
                           "copy of the database gives it a row: ungradable")
    if not verdict:
        return MatchResult(False, "mismatch", details={"witness": "differs from the gold on a "
                                                                  "populated copy"})
    return MatchResult(True, "match", details={"witness": "matches on populated copies"})


def execution_match(pred_sql: str, gold_sql: str, db: "str | os.PathLike | SQLDatabase", *,
                    timeout_s: float = 30.0, engine: str | None = None) -> bool:
    """Whether ``pred_sql`` returns the gold query's result on ``db`` (module doc)."""
    return match(pred_sql, gold_sql, db, timeout_s=timeout_s, engine=engine).correct


# --------------------------------------------------------------------------- env reward

class SQLReward(Reward):
    """Outcome reward of ``tir/SQL-v0`` from the policy's final action.

    Value: ``correct_score`` on an execution match, ``wrong_score`` when the solution is
    well-formed but wrong (including SQL errors, refusals and timeouts), ``format_score`` when
    there is no well-formed ``<solution>`` (defaults 1 / 0 / -1, SkyRL-SQL's).  Typed outcome:
    ``correct`` (``None`` when the gold itself failed), ``answered`` (a well-formed solution),
    ``answer`` (its SQL).  Components, all logged: ``format`` and its alias ``has_answer``,
    ``executed`` (the prediction ran), ``correct``, ``timeout``, ``gold_error`` (1 when the
    gold failed: not the policy's fault; the result then says ``infra_failed`` and the env
    flags the trajectory), ``unwitnessed`` (1 when the gold's result is empty and no
    populated copy gives it a row: ungradable like a failing gold, ``correct`` is ``None`` and
    the trajectory is flagged).

    ``engine``, ``db_dir``, ``settings``, ``cache_dir``: as for ``SQLTool``; give both the same
    values so the reward runs on the engine the policy queried.  A plain synchronous call
    (the env runs it on a worker thread).
    """

    def __init__(self, correct_score: float = 1.0, wrong_score: float = 0.0,
                 format_score: float = -1.0, timeout_s: float = 30.0, *,
                 engine: str | None = None, db_dir: "str | os.PathLike | None" = None,
                 settings: EngineSettings | None = None,
                 cache_dir: "str | os.PathLike | None" = None):
        self.correct_score, self.wrong_score = correct_score, wrong_score
        self.format_score, self.timeout_s = format_score, timeout_s
        self.engine = check_engine(engine)
        self.db_dir, self.settings, self.cache_dir = db_dir, settings, cache_dir
        self._databases: dict[tuple, SQLDatabase] = {}
        self._database_for: "Callable[[Task], SQLDatabase] | None" = None

    def database(self, task: "Task") -> SQLDatabase:
        """The task's database on this reward's engine (remembered per database reference)."""
        meta = task.meta or {}
        key = (meta.get("db_path"), meta.get("db_id"), meta.get("db_dir"), meta.get("data"))
        db = self._databases.get(key)
        if db is None:
            db = open_database(task_database(task, self.db_dir), self.settings, self.cache_dir,
                               engine=self.engine)
            self._databases[key] = db
        return db

    def on_databases(self, database_for: "Callable[[Task], SQLDatabase]") -> "SQLReward":
        """A copy of this reward that runs each task on ``database_for(task)``: an env hands
        its tool's databases, so the solution is graded on the connection the policy queried
        (this reward is never changed)."""
        bound = copy.copy(self)
        bound._database_for = database_for
        return bound

    def score(self, task: "Task", trajectory: "Trajectory | None",
              answer: str | None) -> RewardResult:
        """Score the solution ``answer`` (``None``: no well-formed solution)."""
        parts = {"format": 0.0, "has_answer": 0.0, "executed": 0.0, "correct": 0.0,
                 "timeout": 0.0, "gold_error": 0.0}
        if answer is None:
            return RewardResult(self.format_score, parts, correct=False, answered=False)
        parts["format"] = parts["has_answer"] = 1.0
        database = (self._database_for or self.database)(task)
        try:
            result = match(answer, task.answer, database, timeout_s=self.timeout_s)
        except GoldQueryError:
            parts["gold_error"] = 1.0
            return RewardResult(self.wrong_score, parts, correct=None, answered=True,
                                metadata={"gold_error": True}, infra_failed=True)
        if result.status == "unwitnessed":
            parts["unwitnessed"] = 1.0
            return RewardResult(self.wrong_score, parts, correct=None, answered=True,
                                metadata={"unwitnessed": True}, infra_failed=True)
        parts["executed"] = float(result.status in ("match", "mismatch"))
        parts["timeout"] = float(result.status == "timeout")
        parts["correct"] = float(result.correct)
        value = self.correct_score if result.correct else self.wrong_score
        return RewardResult(value, parts, correct=result.correct, answered=True)


def task_database(task: "Task", db_dir: "str | os.PathLike | None" = None) -> str:
    """The database path of a SQL task (``task_database_path``), checking it has a gold query."""
    if not task.answer:
        raise ValueError(f"SQL task {task.id!r} has no gold query in 'answer'")
    return str(task_database_path(task, db_dir))
