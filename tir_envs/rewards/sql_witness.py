"""Populated copies of a database, for golds whose result is empty.

On one database a gold that returns no rows is matched by every query that returns no rows
(``SELECT name FROM t WHERE 0``): execution match there does not need the question read.  So
an empty gold is also checked on *witness* databases: in-memory copies of the SQLite file with
rows added, built from the gold's own literals (``capacity BETWEEN 5000 AND 10000`` gets rows
of capacity 5000 and 10000, ``first_name = 'timmothy'`` rows named timmothy), the values the
columns already hold (so joins and ``GROUP BY … HAVING count(*) >= 2`` find partners) and
fresh values (so ``NOT IN`` finds outsiders), a few seeds each.  The prediction must return
the gold's rows on every copy (as a multiset, columns in any order), and at least one copy
must give the gold rows: a *witness*.  Where no copy gives the gold any row, the task cannot
tell a query that read the question from one that did not: the episode is ungradable
(``correct=None``, flagged ``infra_failed`` like a failing gold: the task's fault), never
paid.  This is the idea of Spider's test-suite databases (several
databases per schema, built by fuzzing) applied on the fly, on the engine SQLite.
"""

from __future__ import annotations

import functools
import os
import random
import re
import sqlite3
import threading
import time
from pathlib import Path

from tir_envs.rewards.sql_compare import GoldResult, normalize_rows
from tir_envs.tools.sql.sqlite_engine import GuardedConnection, guard, run_sqlite

#: copies per gold, rows added per table to each, and the largest file copied (bytes)
SEEDS = 6
ROWS_PER_TABLE = 40
#: fresh values come from a small pool shared by every column, so new rows join each other
FRESH_POOL = 12
MAX_COPY_BYTES = 64 * 1024 * 1024
_MAX_ROWS = 100_000

_STRING = re.compile(r"'((?:[^']|'')*)'|\"((?:[^\"]|\"\")*)\"")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
#: an identifier bare or in any quoting SQLite reads (`x`, [x], "x"): SkyRL/OmniSQL-style data
#: quotes every name with backticks, and a gold must be witnessed however it is spelled
_IDENT = r"(?:`[^`]+`|\[[^\]]+\]|\"(?:[^\"]|\"\")+\"|\w+)"
_QUOTED_NAME = re.compile(r"`[^`]+`|\[[^\]]+\]")
_PAIR = re.compile(rf"(?:{_IDENT}\s*\.\s*)?({_IDENT})\s*(?:=|==|!=|<>|<=|>=|<|>|\bNOT\s+LIKE\b"
                   r"|\bLIKE\b|\bBETWEEN\b)\s*('(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|-?\d+(?:\.\d+)?)"
                   r"(?:\s+AND\s+(-?\d+(?:\.\d+)?))?", re.IGNORECASE)


def _name(identifier: str) -> str:
    """An identifier without its quotes, lower-cased (how columns are looked up)."""
    if identifier[:1] in "`[\"":
        identifier = identifier[1:-1].replace('""', '"') if identifier[0] == '"' \
            else identifier[1:-1]
    return identifier.lower()


def _literal(text: str) -> object:
    if text[:1] in "'\"":
        return text[1:-1].replace(text[0] * 2, text[0]).replace("%", "").replace("_", "a")
    return float(text) if "." in text else int(text)


def _near(value: object) -> list[object]:
    return [value, value - 1, value + 1] if isinstance(value, (int, float)) else [value]


def gold_literals(gold_sql: str, names: frozenset[str] = frozenset()
                  ) -> tuple[dict[str, list[object]], list[object]]:
    """``(by_column, all)``: the literals the gold compares each column with, and every
    literal it holds (numbers with their neighbours).  Identifiers may be quoted in any style;
    ``names`` (the database's table and column names, lower-cased) tell a double-quoted name
    from a double-quoted string, as SQLite does."""
    by_column: dict[str, list[object]] = {}
    for m in _PAIR.finditer(gold_sql):
        values = [_literal(m.group(2))] + ([_literal(m.group(3))] if m.group(3) else [])
        by_column.setdefault(_name(m.group(1)), []).extend(v for x in values for v in _near(x))
    strings = [_literal(m.group(0)) for m in _STRING.finditer(gold_sql)
               if not (m.group(0)[0] == '"' and _name(m.group(0)) in names)]
    bare = _STRING.sub("''", _QUOTED_NAME.sub(" ", gold_sql))
    numbers = [v for m in _NUMBER.finditer(bare) for v in _near(_literal(m.group(0)))]
    return by_column, strings + numbers


def _columns(con: sqlite3.Connection, table: str) -> list[tuple[str, str, bool, bool]]:
    rows = con.execute(f'PRAGMA table_info("{table}")').fetchall()
    return [(r[1], (r[2] or "").upper(), bool(r[3]), bool(r[5])) for r in rows]


def _existing(con: sqlite3.Connection, table: str, column: str) -> list[object]:
    return [r[0] for r in con.execute(
        f'SELECT DISTINCT "{column}" FROM "{table}" WHERE "{column}" IS NOT NULL LIMIT 50')]


def _numeric(declared: str) -> bool:
    return any(k in declared for k in ("INT", "REAL", "NUM", "DEC", "FLOA", "DOUB"))


def _value(rng: random.Random, column: str, declared: str, notnull: bool, existing: list,
           by_column: dict, literals: list, nulls: bool) -> object:
    numeric = _numeric(declared)
    if column.lower() in by_column and rng.random() < 0.6:
        return rng.choice(by_column[column.lower()])
    roll = rng.random()
    if existing and roll < 0.5:
        return rng.choice(existing)
    kind = [v for v in literals if isinstance(v, (int, float)) == numeric]
    if kind and roll < 0.65:
        return rng.choice(kind)
    if roll < 0.93 or notnull or not nulls:
        fresh = rng.randrange(FRESH_POOL)
        return 10_000_000 + fresh if numeric else f"w{fresh}"
    return None


def _populate(con: sqlite3.Connection, gold_sql: str, seed: int) -> None:
    """Add rows to every table; NULLs only on odd seeds (``x NOT IN (…, NULL)`` is never
    true, so a copy with NULLs may give a gold no row that one without them does)."""
    rng = random.Random(seed)
    tables = [r[0] for r in con.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
    schema = {table: _columns(con, table) for table in tables}
    names = frozenset({t.lower() for t in tables} |
                      {c.lower() for cols in schema.values() for c, *_ in cols})
    by_column, literals = gold_literals(gold_sql, names)
    for table in tables:
        columns = schema[table]
        existing = {c: _existing(con, table, c) for c, *_ in columns}
        names = ", ".join(f'"{c}"' for c, *_ in columns)
        marks = ", ".join("?" for _ in columns)
        for _ in range(ROWS_PER_TABLE):
            row = [_value(rng, column, declared, notnull, existing[column], by_column,
                          literals, seed % 2 == 1)
                   for column, declared, notnull, _pk in columns]
            try:
                con.execute(f'INSERT OR IGNORE INTO "{table}" ({names}) VALUES ({marks})', row)
            except sqlite3.Error:  # a CHECK constraint or an odd type: that row is skipped
                continue


def _copy(path: Path, gold_sql: str, seed: int) -> sqlite3.Connection:
    src = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    mem = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None,
                          factory=GuardedConnection)
    try:
        src.backup(mem)
    finally:
        src.close()
    _populate(mem, gold_sql, seed)
    guard(mem)
    return mem


class Witnesses:
    """The populated copies of one database for one gold query (see the module doc)."""

    def __init__(self, path: Path, gold_sql: str):
        self.connections = [_copy(path, gold_sql, seed) for seed in range(SEEDS)]
        self.lock = threading.Lock()  # one query at a time on these connections

    def check(self, pred_sql: str, gold_sql: str, timeout_s: float) -> bool | None:
        """True: the prediction returns the gold's rows on every copy and one copy gives the
        gold rows; False: it differs somewhere, or the copies took more than ``timeout_s``
        together; None: no copy gives the gold a row.

        The prediction has one time budget for all the copies, not one per copy: a query
        quick on the database and slow on its populated copies (a recursive CTE behind a row
        count) would otherwise hold the lock, and every episode of its task waiting on it,
        for six time limits.  The gold's runs are not charged to it (a prediction that ate
        the time must not make the gold fail on a copy, which could leave the pair
        unwitnessed: void)."""
        witnessed, left = False, timeout_s
        with self.lock:
            for con in self.connections:
                gold = run_sqlite(con, gold_sql, timeout_s=timeout_s, max_rows=_MAX_ROWS,
                                  max_bytes=1 << 26)
                if not gold.ok or gold.more_rows:
                    continue
                rows = normalize_rows(gold.rows)
                if left <= 0:
                    return False
                start = time.monotonic()
                pred = run_sqlite(con, pred_sql, timeout_s=left, max_rows=len(rows) + 1,
                                  max_bytes=1 << 26)
                left -= time.monotonic() - start
                expected = GoldResult(tuple(rows), len(gold.columns), False)
                if not pred.ok or pred.more_rows or \
                        not expected.matches(normalize_rows(pred.rows), len(pred.columns)):
                    return False
                witnessed = witnessed or bool(rows)
        return True if witnessed else None


@functools.lru_cache(maxsize=32)
def witnesses(path: str, gold_sql: str) -> Witnesses | None:
    """The witness copies of the SQLite file ``path`` for ``gold_sql`` (cached), or None for
    a file that is no SQLite database or is larger than ``MAX_COPY_BYTES``."""
    p = Path(path)
    if p.suffix.lower() not in (".sqlite", ".sqlite3", ".db") or \
            os.path.getsize(p) > MAX_COPY_BYTES:
        return None
    return Witnesses(p, gold_sql)
