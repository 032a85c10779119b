"""Execution match for text-to-SQL, and the SQL environment's outcome reward.

``execution_match(pred_sql, gold_sql, db)`` runs the prediction on the env's engine (DuckDB,
read-only, the same path the policy's ``<sql>`` calls take) and the gold query on its
reference engine (Python's ``sqlite3`` on the SQLite source: Spider's gold SQL is written for
SQLite, whose loose typing it relies on, e.g. ``AVG`` over a TEXT column).  Results match when:

* both have the same number of columns, compared by position (names are ignored);
* rows are equal as multisets, after value normalisation: ``1 == 1.0``, numbers rounded to
  10 significant digits, ``Decimal``/``bool`` as numbers, dates and times as ISO text
  (SQLite stores them as text), ``NULL == NULL``;
* when the gold query has an outer ``ORDER BY``, in order, where rows whose sort keys tie may
  come in any order, and under ``LIMIT`` any of the tied rows may be the ones kept (see
  ``tir_envs.tools.sql.ordering``): two engines break ties differently.

A prediction that fails, is refused, or runs past its time limit is a miss.  A gold query that
fails is not the policy's fault: ``GoldQueryError``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import math
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from tir_envs.rewards.base import RewardResult
from tir_envs.tools.sql.database import SQLDatabase, open_database
from tir_envs.tools.sql.executor import run_query
from tir_envs.tools.sql.lexer import has_outer_order_by
from tir_envs.tools.sql.ordering import with_sort_keys

if TYPE_CHECKING:
    from tir_envs.data.task import Task
    from tir_envs.trajectory import Trajectory

SIGNIFICANT_DIGITS = 10
#: rows fetched from a prediction; a bigger result cannot match any Spider gold
MAX_RESULT_ROWS = 100_000


class GoldQueryError(RuntimeError):
    """The gold query failed on its reference engine: the dataset or database is broken."""


# --------------------------------------------------------------------------- values

def normalize_value(value: Any) -> Any:
    """A hashable, engine-neutral form of one result value (see the module doc)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, (float, decimal.Decimal)):
        return _number(float(value))
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, (list, tuple)):
        return tuple(normalize_value(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), normalize_value(v)) for k, v in value.items()))
    return str(value)


def _number(x: float) -> Any:
    if math.isnan(x) or math.isinf(x):
        return str(x)
    rounded = float(f"{x:.{SIGNIFICANT_DIGITS}g}")
    if rounded.is_integer() and abs(rounded) < 2 ** 53:
        return int(rounded)
    return rounded


def normalize_rows(rows: Sequence[Sequence[Any]]) -> list[tuple]:
    return [tuple(normalize_value(v) for v in row) for row in rows]


# --------------------------------------------------------------------------- gold side

@dataclass(frozen=True)
class Run:
    """Consecutive gold rows with equal sort keys: ``taken`` of them are in the gold result;
    ``pool`` holds every row of the full ordering with that key (more when LIMIT cut it)."""

    taken: int
    pool: Counter


@dataclass(frozen=True)
class GoldResult:
    """The normalised gold rows, their width, and how order is judged."""

    rows: tuple[tuple, ...]
    width: int
    ordered: bool
    runs: tuple[Run, ...] | None = None  # tie structure, when the sort keys could be read

    def matches(self, pred_rows: Sequence[tuple], pred_width: int) -> bool:
        """Whether normalised prediction rows match this gold result."""
        if pred_width != self.width or len(pred_rows) != len(self.rows):
            return False
        if not self.ordered:
            return Counter(pred_rows) == Counter(self.rows)
        if self.runs is None:
            return list(pred_rows) == list(self.rows)
        pos = 0
        for run in self.runs:
            segment = Counter(pred_rows[pos:pos + run.taken])
            pos += run.taken
            if run.taken == sum(run.pool.values()):
                if segment != run.pool:
                    return False
            elif segment - run.pool:  # must be drawn from the tied rows
                return False
        return True


def _sqlite_rows(db: SQLDatabase, sql: str, timeout_s: float) -> tuple[list[str], list[tuple]]:
    con = db.sqlite()
    deadline = time.monotonic() + timeout_s
    con.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        cur = con.execute(sql)
        return [d[0] for d in cur.description or []], cur.fetchall()
    finally:
        con.close()


def _reference_rows(db: SQLDatabase, sql: str, timeout_s: float) -> tuple[list[str], list[tuple]]:
    """Rows of ``sql`` on the reference engine: SQLite if the database has a SQLite source."""
    if db.sqlite_path is not None:
        return _sqlite_rows(db, sql, timeout_s)
    result = _run_on_duckdb(db, sql, timeout_s)
    if not result.ok:
        raise RuntimeError(result.error)
    return result.columns, result.rows


def _run_on_duckdb(db: SQLDatabase, sql: str, timeout_s: float):
    """``sql`` through the same executor the tool uses, on a connection of its own."""
    con = db.connect()
    try:
        return run_query(con, sql, timeout_s=timeout_s, max_rows=MAX_RESULT_ROWS)
    finally:
        con.close()


def _runs(db: SQLDatabase, gold_sql: str, rows: list[tuple], width: int,
          timeout_s: float) -> tuple[Run, ...] | None:
    """The tie structure of an ordered gold result, or ``None`` if it cannot be read."""
    rewrite = with_sort_keys(gold_sql)
    if rewrite is None:
        return None
    try:
        _, full = _reference_rows(db, rewrite.sql, timeout_s)
    except Exception:  # noqa: BLE001 - the rewrite is best effort; fall back to strict order
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
        runs.append(Run(taken, Counter(members)))
        left -= taken
    candidate = GoldResult(tuple(rows), width, True, tuple(runs))
    return candidate.runs if candidate.matches(rows, width) else None


@functools.lru_cache(maxsize=8192)
def _gold_cached(db: SQLDatabase, gold_sql: str, timeout_s: float) -> GoldResult:
    try:
        columns, raw = _reference_rows(db, gold_sql, timeout_s)
    except Exception as exc:  # noqa: BLE001 - any failure of the gold is a dataset problem
        raise GoldQueryError(f"the gold query failed on {db.path.name}: {exc}\n  "
                             f"{gold_sql}") from exc
    rows = normalize_rows(raw)
    width = len(columns)
    ordered = has_outer_order_by(gold_sql)
    runs = _runs(db, gold_sql, rows, width, timeout_s) if ordered and rows else None
    return GoldResult(tuple(rows), width, ordered, runs)


def gold_result(gold_sql: str, db: "str | SQLDatabase", timeout_s: float = 30.0) -> GoldResult:
    """The gold query's normalised result (cached per database and query)."""
    return _gold_cached(open_database(db), gold_sql.strip().rstrip(";"), timeout_s)


# --------------------------------------------------------------------------- matching

@dataclass
class MatchResult:
    """``status``: match | mismatch | error | timeout | refused | too_many_rows."""

    correct: bool
    status: str
    error: str | None = None
    pred_rows: int = 0
    gold_rows: int = 0
    details: dict[str, Any] = field(default_factory=dict)


def match(pred_sql: str, gold_sql: str, db: "str | SQLDatabase", *, timeout_s: float = 30.0,
          gold_timeout_s: float = 30.0) -> MatchResult:
    """Execution match with the reasons (see ``execution_match``)."""
    database = open_database(db)
    gold = gold_result(gold_sql, database, gold_timeout_s)
    result = _run_on_duckdb(database, pred_sql, timeout_s)
    if not result.ok:
        return MatchResult(False, result.status, result.error, gold_rows=len(gold.rows))
    if result.more_rows:
        return MatchResult(False, "too_many_rows", f"more than {MAX_RESULT_ROWS} rows",
                           MAX_RESULT_ROWS, len(gold.rows))
    rows = normalize_rows(result.rows)
    ok = gold.matches(rows, len(result.columns))
    return MatchResult(ok, "match" if ok else "mismatch", None, len(rows), len(gold.rows))


def execution_match(pred_sql: str, gold_sql: str, db: "str | SQLDatabase", *,
                    timeout_s: float = 30.0) -> bool:
    """Whether ``pred_sql`` (run on DuckDB) returns the gold query's result (module doc).

    ``db`` is a path to a SQLite or DuckDB file, or an ``SQLDatabase``.
    """
    return match(pred_sql, gold_sql, db, timeout_s=timeout_s).correct


# --------------------------------------------------------------------------- env reward

_SOLUTION = re.compile(r"<solution>(.*?)</solution>", re.DOTALL)
_FENCE = re.compile(r"^```[A-Za-z]*\s*\n?(.*?)\n?\s*```$", re.DOTALL)


def extract_solution(text: str) -> str | None:
    """The SQL in the action's ``<solution>…</solution>``, or ``None`` if the format is off.

    Exactly one complete block, not empty, holding no ``<sql>`` tag.  A Markdown code fence
    around the query is tolerated and removed.
    """
    blocks = _SOLUTION.findall(text)
    if len(blocks) != 1 or text.count("<solution>") != 1:
        return None
    sql = blocks[0].strip()
    fenced = _FENCE.match(sql)
    if fenced:
        sql = fenced.group(1).strip()
    if not sql or re.search(r"</?(sql|solution|observation)>", sql):
        return None
    return sql


class SQLReward:
    """Outcome reward of ``tir/SQL-v0`` from the policy's final action.

    Value: ``correct_score`` on an execution match, ``wrong_score`` when the solution is
    well-formed but wrong (including SQL errors and timeouts), ``format_score`` when there is
    no well-formed ``<solution>`` (defaults 1 / 0 / -1, SkyRL-SQL's).  Components, all logged:
    ``format`` and its shared alias ``has_answer`` (1 if well-formed), ``executed`` (1 if the prediction ran), ``correct``,
    ``timeout``, and ``gold_error`` (1 when the gold itself failed: not the policy's fault).
    """

    def __init__(self, correct_score: float = 1.0, wrong_score: float = 0.0,
                 format_score: float = -1.0, timeout_s: float = 30.0):
        self.correct_score, self.wrong_score = correct_score, wrong_score
        self.format_score, self.timeout_s = format_score, timeout_s

    def __call__(self, task: "Task", trajectory: "Trajectory", actions: Sequence[str],
                 db: "str | SQLDatabase | None" = None) -> RewardResult:
        """Score the final action; ``db`` defaults to the task's ``meta['db_path']``."""
        final = actions[-1].split("<observation>", 1)[0] if actions else ""
        sql = extract_solution(final)
        parts = {"format": 0.0, "has_answer": 0.0, "executed": 0.0, "correct": 0.0,
                 "timeout": 0.0, "gold_error": 0.0}
        if sql is None:
            return RewardResult(self.format_score, parts)
        parts["format"] = parts["has_answer"] = 1.0
        try:
            result = match(sql, task.answer, db or task_database(task), timeout_s=self.timeout_s)
        except GoldQueryError:
            parts["gold_error"] = 1.0
            return RewardResult(self.wrong_score, parts)
        parts["executed"] = float(result.status in ("match", "mismatch", "too_many_rows"))
        parts["timeout"] = float(result.status == "timeout")
        parts["correct"] = float(result.correct)
        return RewardResult(self.correct_score if result.correct else self.wrong_score, parts)


def task_database(task: "Task") -> str:
    """The database path of a SQL task (``task.meta['db_path']``), with a clear error."""
    path = task.meta.get("db_path")
    if not path:
        raise ValueError(f"SQL task {task.id!r} has no meta['db_path']; give each task the "
                         "path of its SQLite or DuckDB database")
    if not task.answer:
        raise ValueError(f"SQL task {task.id!r} has no gold query in 'answer'")
    return str(path)
