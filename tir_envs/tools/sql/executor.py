"""Run one query on a read-only DuckDB connection: refused, failed, timed out, or rows.

Safety is layered.  The database file is opened read-only; the instance is created with
``enable_external_access=false`` (no files, no ``ATTACH``/``COPY``/``INSTALL``/``LOAD``) and its
configuration locked, so a query cannot turn either back on; and before running, the text is
parsed with DuckDB's own parser and anything but a single ``SELECT``-type statement (which
includes ``DESCRIBE``, ``SHOW``, ``PRAGMA table_info``) is refused with a message the model can
act on.  A statement that runs past its time limit is stopped with ``interrupt()`` from a
timer thread.  Nothing here raises for what a query does: the outcome is a ``QueryResult``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import duckdb

from tir_envs.tools.sql.dialect import adapt

#: statement types a policy may run (DuckDB parses DESCRIBE/SHOW/SUMMARIZE/VALUES as SELECT)
ALLOWED_STATEMENTS = frozenset({duckdb.StatementType.SELECT})


@dataclass
class QueryResult:
    """The outcome of one query.  ``status``: ok | error | timeout | refused."""

    status: str
    columns: list[str] = field(default_factory=list)
    rows: list[tuple] = field(default_factory=list)
    more_rows: bool = False  # the result had rows beyond ``rows`` (fetch cap reached)
    error: str | None = None
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def refusal(con: duckdb.DuckDBPyConnection, sql: str) -> str | None:
    """Why ``sql`` may not run (a message for the model), or ``None`` if it may.

    A parse error is not a refusal: the query runs and DuckDB's own error comes back.
    """
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error:
        return None
    if not statements:
        return "the query is empty; write one SELECT statement"
    if len(statements) > 1:
        return (f"found {len(statements)} statements; run one SELECT statement at a time "
                "(no ';' between statements)")
    kind = statements[0].type
    if kind not in ALLOWED_STATEMENTS:
        name = getattr(kind, "name", str(kind))
        return (f"{name} statements are not allowed: the database is read-only and only "
                "SELECT queries (including WITH, DESCRIBE, SHOW) can run")
    return None


def run_query(con: duckdb.DuckDBPyConnection, sql: str, *, timeout_s: float,
              max_rows: int) -> QueryResult:
    """Run ``sql`` on ``con``; keep at most ``max_rows`` rows (``more_rows`` says if cut).

    The text is adapted first (backtick identifiers, case-insensitive LIKE: see ``dialect``).
    """
    start = time.perf_counter()
    text = adapt(sql)
    why = refusal(con, text)
    if why is not None:
        return QueryResult("refused", error=why, elapsed_s=time.perf_counter() - start)
    guard = _Deadline(con, timeout_s)
    try:
        with guard:
            cursor = con.execute(text)
            columns = [d[0] for d in (cursor.description or [])]
            rows = cursor.fetchmany(max_rows + 1)
    except duckdb.InterruptException:
        return QueryResult("timeout", error=f"the query ran past the {timeout_s:g} s time limit "
                           "and was stopped", elapsed_s=time.perf_counter() - start)
    except duckdb.Error as exc:
        if guard.fired:  # interrupted while the engine reported it another way
            return QueryResult("timeout", error=f"the query ran past the {timeout_s:g} s time "
                               "limit and was stopped", elapsed_s=time.perf_counter() - start)
        return QueryResult("error", error=_error_text(exc), elapsed_s=time.perf_counter() - start)
    more = len(rows) > max_rows
    return QueryResult("ok", columns, [tuple(r) for r in rows[:max_rows]], more,
                       elapsed_s=time.perf_counter() - start)


def _error_text(exc: BaseException) -> str:
    """DuckDB's message without its hint to install extensions or visit a URL."""
    text = str(exc).strip()
    for marker in ("\nFor more info", "\nPlease try installing", "\nTo install"):
        cut = text.find(marker)
        if cut > 0:
            text = text[:cut].rstrip()
    return text


class _Deadline:
    """Interrupts ``con`` if the ``with`` body is still running after ``timeout_s``.

    The lock makes "finished" and "interrupt" mutually exclusive, so a late timer can never
    interrupt the connection's next query.
    """

    def __init__(self, con: Any, timeout_s: float):
        self.con, self.timeout_s = con, timeout_s
        self.fired = False
        self._done = False
        self._lock = threading.Lock()
        self._timer = threading.Timer(timeout_s, self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        with self._lock:
            if not self._done:
                self.fired = True
                self.con.interrupt()

    def __enter__(self) -> "_Deadline":
        self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        with self._lock:
            self._done = True
        self._timer.cancel()
