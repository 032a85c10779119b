"""Run one query on a read-only SQLite connection: the engine Spider, BIRD and SynSQL are written for.

Their gold SQL (and a model trained on it) relies on SQLite's semantics: ``"France"`` is a string
when no column has that name, a bare column next to ``MAX()`` comes from the max row, ``/`` on
integers truncates, NULLs sort first, ``LIKE`` ignores ASCII case.  Running it on SQLite itself
keeps every one of those exact; nothing in the text is rewritten.

Safety is layered, each layer enough on its own for what it covers:

1. the file is opened ``mode=ro&immutable=1``: SQLite refuses every write, takes no locks and
   creates no ``-journal``/``-wal``/``-shm`` file next to the database;
2. ``PRAGMA query_only`` is on, ``ATTACH`` is limited to zero databases, a value is capped at
   ``MAX_VALUE_BYTES`` (``zeroblob(10000000000)`` fails instead of eating memory);
3. an authorizer allows only reads: ``SELECT``, reading columns, calling functions (except
   ``load_extension`` and the pointer-taking ``fts3_tokenizer``), recursive CTEs, and the
   schema pragmas in ``READ_PRAGMAS``.  Everything else (writes, DDL, ``ATTACH`` — which is also
   how ``VACUUM INTO 'file'`` starts —, transactions, ``PRAGMA x = y``) is denied;
4. before running, the text is split on semicolons outside literals and comments: exactly one
   statement may run, and one that starts with a statement word other than a query's
   (``REFUSED_WORDS``) or is a shell dot-command (``.tables``) is refused with a reason the
   model can act on.  (Other text goes to SQLite, whose syntax error names the problem.)

A progress handler stops a statement past its deadline (checked every ``PROGRESS_STEPS``
virtual-machine steps, so it also stops a runaway recursive CTE); results are capped in rows
and bytes.  Nothing here raises for what a query does: the outcome is a ``QueryResult``.
"""

from __future__ import annotations

import math
import os
import re
import sqlite3
import time
from pathlib import Path

from tir_envs.tools.sql.lexer import split_statements
from tir_envs.tools.sql.result import QueryResult

#: the first words of SQLite's statements that are not queries
REFUSED_WORDS = frozenset({"INSERT", "REPLACE", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER",
                           "ATTACH", "DETACH", "VACUUM", "REINDEX", "ANALYZE", "BEGIN",
                           "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE"})
#: pragmas that only read the schema
READ_PRAGMAS = frozenset({"table_info", "table_xinfo", "table_list", "index_list",
                          "index_info", "index_xinfo", "foreign_key_list", "collation_list"})
DENIED_FUNCTIONS = frozenset({"load_extension", "fts3_tokenizer"})
MAX_VALUE_BYTES = 10_000_000
#: virtual-machine steps between two deadline checks (a check costs well under a microsecond)
PROGRESS_STEPS = 2000
_ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ,
                              sqlite3.SQLITE_RECURSIVE})


def _authorize(action: int, arg1: str | None, arg2: str | None, _db: str | None,
               _trigger: str | None) -> int:
    """SQLite's authorizer callback: reads pass, everything else is denied."""
    if action in _ALLOWED_ACTIONS:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_DENY if (arg2 or "").lower() in DENIED_FUNCTIONS else sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in READ_PRAGMAS:
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


def connect_sqlite(path: str | os.PathLike) -> sqlite3.Connection:
    """A guarded read-only connection to the SQLite file ``path`` (see the module doc).

    ``check_same_thread=False``: an episode's queries run on worker threads, one at a time.
    """
    uri = Path(path).resolve().as_uri() + "?mode=ro&immutable=1"
    con = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None,
                          factory=GuardedConnection)
    return guard(con)


def guard(con: "GuardedConnection") -> "GuardedConnection":
    """Layers 2–4 on an open connection: query-only, no attachments, capped values, the
    read-only authorizer and the deadline check (also for in-memory copies of a database)."""
    con.execute("PRAGMA query_only = 1")
    con.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    con.set_authorizer(_authorize)
    con.set_progress_handler(con.past_deadline, PROGRESS_STEPS)
    return con


class GuardedConnection(sqlite3.Connection):
    """A connection that carries the deadline of its running query: its progress handler is
    installed once and reads ``deadline`` (infinite between queries)."""

    deadline = math.inf

    def past_deadline(self) -> bool:
        return time.monotonic() > self.deadline


#: leading whitespace and comments, then the first word (or a dot-command's dot and name)
_LEAD = re.compile(r"\s*(?:(?:--[^\n]*(?:\n|\Z)|/\*.*?(?:\*/|\Z))\s*)*(\.?\s*[A-Za-z_]*)",
                   re.DOTALL)


def _text(raw: bytes) -> str:
    """Text values as ``str``, bytes that are not UTF-8 replaced.  A connection switches to
    this (slower) decoder the first time a query meets such a value (some databases store
    Latin-1), so the query is answered instead of failing, identically for gold and
    prediction."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace")


def refusal(sql: str) -> tuple[str | None, str]:
    """``(why, statement)``: why ``sql`` may not run (``None`` if it may) and the single
    statement to run (without its terminating semicolon)."""
    statement = _one_statement(sql)
    if isinstance(statement, str) and statement.lstrip()[:6].upper() == "SELECT":
        return None, statement  # the usual text: no comment or keyword to look past
    if isinstance(statement, int):
        if statement == 0:
            return "the query is empty; write one SELECT statement", ""
        return (f"found {statement} statements; run one SELECT statement at a time "
                "(no ';' between statements)"), ""
    lead = _LEAD.match(statement)
    word = lead.group(1).upper() if lead else ""
    if not word and lead and lead.end() == len(statement):
        return "the query is empty; write one SELECT statement", ""
    if word.startswith("."):
        return (f"'.{word[1:].strip().lower()}' is a command of the sqlite3 shell, not SQL; list "
                "tables with SELECT name FROM sqlite_master WHERE type = 'table', columns with "
                "PRAGMA table_info(name)"), ""
    if word in REFUSED_WORDS:
        return (f"{word} statements are not allowed: the database is read-only and only "
                "SELECT queries (including WITH, VALUES, PRAGMA table_info) can run"), ""
    return None, statement


def _one_statement(sql: str) -> str | int:
    """The single statement of ``sql``, or how many statements it holds (0, 2, …).

    Fast paths for the usual texts (no ``;``, or one ``;`` at the very end: a terminator, or
    inside a comment or an unterminated literal, where dropping it changes nothing); anything
    else is split by the lexer, which knows literals and comments.
    """
    count = sql.count(";")
    if count == 0:
        return sql
    text = sql.rstrip()
    if count == 1 and text.endswith(";"):
        return text[:-1]
    statements = split_statements(sql)
    return statements[0] if len(statements) == 1 else len(statements)


def run_sqlite(con: sqlite3.Connection, sql: str, *, timeout_s: float, max_rows: int,
               max_bytes: int) -> QueryResult:
    """Run ``sql`` on ``con``: at most ``max_rows`` rows kept (``more_rows`` says if cut), an
    error if the rows kept pass ``max_bytes``."""
    start = time.perf_counter()
    why, statement = refusal(sql)
    if why is not None:
        return QueryResult("refused", error=why, elapsed_s=time.perf_counter() - start)
    deadline = time.monotonic() + timeout_s
    guarded = isinstance(con, GuardedConnection)
    if guarded:
        con.deadline = deadline
    else:
        con.set_progress_handler(lambda: time.monotonic() > deadline, PROGRESS_STEPS)
    cursor = None
    try:
        try:
            cursor = con.execute(statement)
            rows, more = _fetch(cursor, max_rows, max_bytes)
        except sqlite3.OperationalError as exc:
            if "decode" not in str(exc) or con.text_factory is _text:
                raise
            con.text_factory = _text
            cursor = con.execute(statement)
            rows, more = _fetch(cursor, max_rows, max_bytes)
        columns = [d[0] for d in cursor.description or []]
    except _TooLarge:
        return QueryResult("error", error=f"the result is larger than {max_bytes // 1_000_000} MB; "
                           "select fewer rows or shorter values",
                           elapsed_s=time.perf_counter() - start)
    except (sqlite3.Error, sqlite3.Warning, ValueError, OverflowError) as exc:
        elapsed = time.perf_counter() - start
        if time.monotonic() > deadline and "interrupt" in str(exc):
            return QueryResult("timeout", error=f"the query ran past the {timeout_s:g} s time "
                               "limit and was stopped", elapsed_s=elapsed)
        return QueryResult("error", error=_error_text(exc), elapsed_s=elapsed)
    finally:
        if cursor is not None:
            cursor.close()
        if guarded:
            con.deadline = math.inf
        else:
            con.set_progress_handler(None, 0)
    return QueryResult("ok", columns, rows, more, elapsed_s=time.perf_counter() - start)


class _TooLarge(Exception):
    pass


def _fetch(cursor: sqlite3.Cursor, max_rows: int, max_bytes: int) -> tuple[list[tuple], bool]:
    """Rows up to ``max_rows`` (and whether more exist), fetched in chunks whose size is
    counted before the next is read, so a huge result stops early."""
    rows: list[tuple] = []
    size = 0
    while len(rows) <= max_rows:
        wanted = min(max_rows + 1 - len(rows), FETCH_CHUNK)
        chunk = cursor.fetchmany(wanted)
        size += sum([len(v) if v.__class__ in _SIZED else 8 for row in chunk for v in row])
        if size > max_bytes:
            raise _TooLarge
        rows += chunk
        if len(chunk) < wanted:  # the cursor is exhausted
            break
    return rows[:max_rows], len(rows) > max_rows


FETCH_CHUNK = 1024
_SIZED = (str, bytes)


def _error_text(exc: BaseException) -> str:
    """SQLite's message, named as SQLite's so the model knows which dialect answered."""
    text = str(exc).strip() or type(exc).__name__
    if text == "not authorized":
        text = ("not authorized: the database is read-only; this statement, pragma or "
                "function is not allowed")
    return f"SQLite error: {text}"
