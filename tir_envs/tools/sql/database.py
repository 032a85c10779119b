"""A database an episode queries: its SQLite source (if any) and its read-only DuckDB copy.

One DuckDB instance per database file and process, opened read-only with external access
disabled and the configuration locked; every episode gets its own cursor (connection) on it,
which is cheap and lets ``interrupt()`` stop one episode's query without touching the others.
The SQLite file, when there is one, is only ever read: by the converter and by the gold
reference of the reward, both through a ``mode=ro&immutable=1`` connection.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

import duckdb

from tir_envs.tools.sql.convert import duckdb_copy, open_sqlite_readonly

SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")


@dataclass(frozen=True)
class EngineSettings:
    """Per-instance DuckDB settings.  ``threads=1`` by default: many episodes run at once
    and each query is small, so parallelism across episodes beats parallelism in a query."""

    threads: int = 1
    memory_limit: str = "1GB"


class SQLDatabase:
    """A database by path: ``.sqlite``/``.sqlite3``/``.db`` (converted to DuckDB once, see
    ``convert.py``) or ``.duckdb`` (used as is).  Use ``open_database`` to share instances."""

    def __init__(self, path: str | os.PathLike, settings: EngineSettings = EngineSettings(),
                 cache_dir: str | os.PathLike | None = None):
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"database {self.path} does not exist; pass the path of a "
                                    f"SQLite ({', '.join(SQLITE_SUFFIXES)}) or .duckdb file")
        suffix = self.path.suffix.lower()
        if suffix not in SQLITE_SUFFIXES + (".duckdb",):
            raise ValueError(f"database {self.path}: unknown file type {suffix!r}; use a SQLite "
                             f"({', '.join(SQLITE_SUFFIXES)}) or .duckdb file")
        self.settings = settings
        self.cache_dir = cache_dir
        self.sqlite_path = self.path if suffix in SQLITE_SUFFIXES else None
        self.name = self.path.stem
        self._instance: duckdb.DuckDBPyConnection | None = None
        self._lock = threading.Lock()

    @property
    def duckdb_path(self) -> Path:
        if self.sqlite_path is None:
            return self.path
        return duckdb_copy(self.sqlite_path, self.cache_dir)

    def connect(self) -> duckdb.DuckDBPyConnection:
        """A new connection (cursor) on the shared read-only instance."""
        with self._lock:
            if self._instance is None:
                self._instance = _open_readonly(self.duckdb_path, self.settings)
            return self._instance.cursor()

    def sqlite(self) -> sqlite3.Connection | None:
        """A read-only connection to the SQLite source, or ``None`` for a DuckDB file."""
        return None if self.sqlite_path is None else open_sqlite_readonly(self.sqlite_path)

    def close(self) -> None:
        with self._lock:
            if self._instance is not None:
                self._instance.close()
                self._instance = None

    def __repr__(self) -> str:
        return f"SQLDatabase({str(self.path)!r})"


def _open_readonly(path: Path, settings: EngineSettings) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(str(path), read_only=True, config={
        "enable_external_access": False,
        "autoload_known_extensions": False,
        "autoinstall_known_extensions": False,
        "threads": settings.threads,
        "memory_limit": settings.memory_limit,
    })
    # DuckDB hands back its existing instance for a file already open in this process with the
    # same config (two SQLDatabase objects on one cached copy); that one is locked already.
    locked = con.execute("SELECT current_setting('lock_configuration')").fetchone()[0]
    if not locked:
        con.execute("SET enable_progress_bar = false")
        con.execute("SET lock_configuration = true")
    return con


_DATABASES: dict[tuple[str, EngineSettings, str], SQLDatabase] = {}
_DATABASES_LOCK = threading.Lock()


def open_database(db: "str | os.PathLike | SQLDatabase", settings: EngineSettings | None = None,
                  cache_dir: str | os.PathLike | None = None) -> SQLDatabase:
    """The process-wide ``SQLDatabase`` for a path (or ``db`` itself if it is one)."""
    if isinstance(db, SQLDatabase):
        return db
    settings = settings or EngineSettings()
    key = (str(Path(db).resolve()), settings, str(cache_dir or ""))
    with _DATABASES_LOCK:
        if key not in _DATABASES:
            _DATABASES[key] = SQLDatabase(db, settings, cache_dir)
        return _DATABASES[key]


def close_databases() -> None:
    """Close every shared instance (they reopen on next use), e.g. before deleting a cache."""
    with _DATABASES_LOCK:
        databases = list(_DATABASES.values())
        _DATABASES.clear()
    for db in databases:
        db.close()
