"""Where a SQL task's database file is: the layouts of Spider, BIRD, SynSQL and SkyRL-SQL.

Locating a file is the data layer's job (``sql_records`` resolves databases at load time); the
SQL tool (``tir_envs.tools.sql``) opens what this finds.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tir_envs.task import Task

SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
DUCKDB_SUFFIXES = (".duckdb",)


def find_database(db_id: str, db_dir: str | os.PathLike, data: str | None = None) -> Path:
    """The database ``db_id`` in the folder ``db_dir``, with an error listing where it looked.

    Layouts tried: ``<db_id>.<ext>``, ``<db_id>/<db_id>.<ext>`` (Spider, BIRD, SynSQL) and, when
    ``data`` names a SkyRL-SQL source (``synsql``, ``spider``, ``bird``), the same under that
    source's folder of the OmniSQL data release (``SKYRL_SUBDIRS``).
    """
    base = Path(db_dir)
    if not base.is_dir():
        raise FileNotFoundError(f"databases folder {base} does not exist (looking for {db_id!r})")
    roots = [base]
    if data in SKYRL_SUBDIRS:
        roots.insert(0, base / SKYRL_SUBDIRS[data])
    candidates = [root / f"{db_id}{ext}" for root in roots
                  for ext in SQLITE_SUFFIXES + DUCKDB_SUFFIXES]
    candidates += [root / db_id / f"{db_id}{ext}" for root in roots
                   for ext in SQLITE_SUFFIXES + DUCKDB_SUFFIXES]
    for path in candidates:
        if path.is_file():
            return path
    shown = ", ".join(str(c) for c in candidates[:4])
    raise FileNotFoundError(f"no database for db_id {db_id!r} in {base}: looked for {shown}, "
                            f"… ({len(candidates)} paths); check db_dir and the db_id")


#: SkyRL-SQL's ``data`` field -> its databases' folder inside the OmniSQL ``data/`` release
SKYRL_SUBDIRS = {"synsql": "SynSQL-2.5M/databases", "spider": "spider/database",
                 "bird": "bird/train/train_databases"}


def task_database_path(task: "Task", db_dir: str | os.PathLike | None = None) -> Path:
    """A SQL task's database: ``meta['db_path']`` (absolute, or relative to ``db_dir`` /
    ``meta['db_dir']``), else ``meta['db_id']`` looked up in ``db_dir`` or ``meta['db_dir']``."""
    meta = task.meta or {}
    base = db_dir or meta.get("db_dir")
    if meta.get("db_path"):
        path = Path(meta["db_path"])
        if not path.is_absolute() and base is not None:
            path = Path(base) / path
        return path  # a missing file fails when opened, naming the path
    if meta.get("db_id") and base is not None:
        return find_database(str(meta["db_id"]), base, meta.get("data"))
    raise ValueError(f"SQL task {task.id!r} names no database: give meta['db_path'], or "
                     "meta['db_id'] with a databases folder (db_dir=... or meta['db_dir'])")
