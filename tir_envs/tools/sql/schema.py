"""The database schema as the prompt shows it: CREATE TABLE statements plus sample rows.

Column types are those of the engine the policy queries: on SQLite the declared types (as
Spider, BIRD and SynSQL wrote them), on DuckDB DuckDB's; primary and foreign keys come from
the SQLite source when there is one.  Each table is followed by a few sample rows
in the same compact table format the ``<sql>`` tool answers with, so values' spelling and
format (dates stored as text, ``'T'``/``'F'`` flags) are visible before the first query.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tir_envs.data.databases import task_database_path
from tir_envs.tools.sql.database import EngineSettings, SQLDatabase, open_database
from tir_envs.tools.sql.table import render_table

if TYPE_CHECKING:
    from tir_envs.task import Task

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class SchemaStyle:
    """How the schema is rendered: ``sample_rows`` per table (0 for none), cell width."""

    sample_rows: int = 3
    max_cell_chars: int = 40


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def ident(name: str) -> str:
    """An identifier as written in SQL: bare when plain, double-quoted when it has to be
    (odd characters, or a word DuckDB reserves, like ``show``)."""
    if _PLAIN.match(name) and name.lower() not in _reserved_words():
        return name
    return quoted(name)


@functools.lru_cache(maxsize=1)
def _reserved_words() -> frozenset[str]:
    import duckdb

    rows = duckdb.execute("SELECT keyword_name FROM duckdb_keywords() "
                          "WHERE keyword_category = 'reserved'").fetchall()
    return frozenset(r[0].lower() for r in rows)


@dataclass(frozen=True)
class _Keys:
    primary: tuple[str, ...]
    foreign: tuple[tuple[tuple[str, ...], str, tuple[str, ...]], ...]


def _sqlite_keys(db: SQLDatabase, table: str) -> _Keys:
    con = db.sqlite()
    if con is None:
        return _Keys((), ())
    try:
        info = con.execute(f"PRAGMA table_info({quoted(table)})").fetchall()
        primary = tuple(r[1] for r in sorted(info, key=lambda r: r[5]) if r[5])
        groups: dict[int, tuple[str, list[str], list[str]]] = {}
        for row in con.execute(f"PRAGMA foreign_key_list({quoted(table)})").fetchall():
            fk_id, _, ref_table, column, ref_column = row[:5]
            entry = groups.setdefault(fk_id, (ref_table, [], []))
            entry[1].append(column)
            entry[2].append(ref_column or column)
        foreign = tuple((tuple(cols), ref, tuple(refs)) for ref, cols, refs in groups.values())
        return _Keys(primary, foreign)
    finally:
        con.close()


def create_table(table: str, columns: list[tuple[str, str]], keys: _Keys) -> str:
    """One ``CREATE TABLE`` statement."""
    lines = [f"  {ident(name)} {kind}".rstrip() for name, kind in columns]
    if keys.primary:
        lines.append(f"  PRIMARY KEY ({', '.join(ident(c) for c in keys.primary)})")
    for cols, ref, refs in keys.foreign:
        lines.append(f"  FOREIGN KEY ({', '.join(ident(c) for c in cols)}) REFERENCES "
                     f"{ident(ref)} ({', '.join(ident(c) for c in refs)})")
    return f"CREATE TABLE {ident(table)} (\n" + ",\n".join(lines) + "\n);"


def render_schema(db: SQLDatabase, style: SchemaStyle = SchemaStyle()) -> str:
    """The whole schema text (cached per database and style: it is rendered every reset)."""
    return _render_cached(db, style)


@functools.lru_cache(maxsize=256)
def _render_cached(db: SQLDatabase, style: SchemaStyle) -> str:
    con = db.sqlite() if db.engine == "sqlite" else db.connect()
    try:
        columns = _sqlite_columns if db.engine == "sqlite" else _duckdb_columns
        blocks = []
        for table in _tables(con, db.engine):
            block = create_table(table, columns(con, table), _sqlite_keys(db, table))
            if style.sample_rows > 0:
                block += "\n" + _samples(con, table, style)
            blocks.append(block)
        return "\n\n".join(blocks)
    finally:
        con.close()


def _tables(con, engine: str) -> list[str]:
    if engine == "sqlite":
        return sorted(r[0] for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"))
    return [r[0] for r in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
        "ORDER BY table_name").fetchall()]


def _sqlite_columns(con, table: str) -> list[tuple[str, str]]:
    """Columns with their declared types, in the file's own words (``VARCHAR(20)``, ``INT``)."""
    return [(r[1], r[2] or "") for r in
            con.execute(f"PRAGMA table_info({quoted(table)})").fetchall()]


def _duckdb_columns(con, table: str) -> list[tuple[str, str]]:
    return con.execute(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = 'main' AND table_name = ? ORDER BY ordinal_position",
        [table]).fetchall()


def describe_database(task: "Task", engine: str | None = None,
                      style: SchemaStyle = SchemaStyle(), *,
                      db_dir: str | os.PathLike | None = None,
                      settings: EngineSettings | None = None,
                      cache_dir: str | os.PathLike | None = None) -> tuple[str, str]:
    """``(engine_name, schema_text)`` of a task's database, for the prompt.

    ``engine_name`` is what the prompt must print (``"SQLite"`` or ``"DuckDB"``): the engine
    that will run the policy's queries with the same ``engine`` argument.
    """
    db = open_database(task_database_path(task, db_dir), settings, cache_dir, engine=engine)
    return db.engine_name, render_schema(db, style)


def _samples(con, table: str, style: SchemaStyle) -> str:
    cur = con.execute(f"SELECT * FROM {quoted(table)} LIMIT {int(style.sample_rows)}")
    columns = [d[0] for d in cur.description]
    rows = cur.fetchall()
    text = render_table(columns, rows, max_rows=style.sample_rows,
                        max_cell_chars=style.max_cell_chars)
    head = f"/* {len(rows)} example row{'s' if len(rows) != 1 else ''} of {ident(table)}:"
    return head + "\n" + text.rsplit("\n", 1)[0] + "\n*/"
