"""A database an episode queries, and the engine that answers: its own dialect by default.

* A SQLite file (``.sqlite``/``.sqlite3``/``.db``: Spider, BIRD, SynSQL) is queried with SQLite
  through Python's ``sqlite3`` (``sqlite_engine``): one guarded read-only connection per episode.
* A DuckDB file (``.duckdb``), a Parquet/CSV file, or a folder of them is queried with DuckDB:
  one read-only instance per database and process, every episode a cursor on it.  Parquet and
  CSV files are loaded into an in-memory instance (one table per file, named after it) before
  file access is switched off.
* ``engine="duckdb"`` on a SQLite file is an explicit choice: the file is converted once into a
  DuckDB copy (``convert.py``) and the instance runs with SQLite's conventions where DuckDB has
  a setting for them (``SQLITE_COMPATIBLE``: NULLs first in ascending order, ``/`` on integers
  truncating).  Other differences remain (strict types, ``GROUP BY`` rules, double-quoted
  strings); see ``docs/sql.md``.

Every DuckDB instance runs with external access disabled and its configuration locked.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import duckdb

from tir_envs.data.databases import DUCKDB_SUFFIXES, SQLITE_SUFFIXES
from tir_envs.tools.sql.convert import duckdb_copy, open_sqlite_readonly
from tir_envs.tools.sql.sqlite_engine import connect_sqlite

FILE_SUFFIXES = (".parquet", ".csv")
#: engine key -> the name the prompt prints
ENGINE_NAMES = {"sqlite": "SQLite", "duckdb": "DuckDB"}
#: DuckDB settings that give SQLite's answer where the two engines differ by convention
SQLITE_COMPATIBLE = {"default_null_order": "nulls_first_on_asc_last_on_desc",
                     "integer_division": True}


@dataclass(frozen=True)
class EngineSettings:
    """Per-instance DuckDB settings.  ``threads=1`` by default: many episodes run at once
    and each query is small, so parallelism across episodes beats parallelism in a query."""

    threads: int = 1
    memory_limit: str = "1GB"


def file_kind(path: Path) -> str:
    """``sqlite`` | ``duckdb`` | ``files`` (Parquet/CSV file or folder), with a clear error."""
    if path.is_dir():
        if not any(p.suffix.lower() in FILE_SUFFIXES for p in path.iterdir()):
            raise ValueError(f"database folder {path} holds no {'/'.join(FILE_SUFFIXES)} files")
        return "files"
    if not path.is_file():
        raise FileNotFoundError(f"database {path} does not exist; pass the path of a SQLite "
                                f"({', '.join(SQLITE_SUFFIXES)}), .duckdb, Parquet or CSV file")
    suffix = path.suffix.lower()
    if suffix in SQLITE_SUFFIXES:
        return "sqlite"
    if suffix in DUCKDB_SUFFIXES:
        return "duckdb"
    if suffix in FILE_SUFFIXES:
        return "files"
    raise ValueError(f"database {path}: unknown file type {suffix!r}; use a SQLite "
                     f"({', '.join(SQLITE_SUFFIXES)}), .duckdb, .parquet or .csv file")


def check_engine(engine: str | None) -> str | None:
    if engine is not None and engine not in ENGINE_NAMES:
        raise ValueError(f"engine must be one of {sorted(ENGINE_NAMES)} or None (the "
                         f"database's own dialect), got {engine!r}")
    return engine


class SQLDatabase:
    """A database by path, with the engine that queries it (see the module doc).

    Use ``open_database`` to share instances.  ``connect()`` gives a new connection for one
    episode; ``connection()`` lends a pooled one for a single query (the reward).
    """

    def __init__(self, path: str | os.PathLike, settings: EngineSettings = EngineSettings(),
                 cache_dir: str | os.PathLike | None = None, *, engine: str | None = None):
        self.path = Path(path)
        self.kind = file_kind(self.path)
        default = "sqlite" if self.kind == "sqlite" else "duckdb"
        self.engine = check_engine(engine) or default
        if self.engine == "sqlite" and self.kind != "sqlite":
            raise ValueError(f"database {self.path} is not a SQLite file; engine='sqlite' needs "
                             f"one ({', '.join(SQLITE_SUFFIXES)}); use engine='duckdb' or None")
        self.settings = settings
        self.cache_dir = cache_dir
        self.sqlite_path = self.path if self.kind == "sqlite" else None
        self.name = self.path.stem
        self._instance: duckdb.DuckDBPyConnection | None = None
        self._lock = threading.Lock()
        self._idle: list[Any] = []

    @property
    def engine_name(self) -> str:
        """The engine as the prompt names it: ``SQLite`` or ``DuckDB``."""
        return ENGINE_NAMES[self.engine]

    @property
    def duckdb_path(self) -> Path:
        """The DuckDB file the DuckDB engine reads (the converted copy of a SQLite file)."""
        if self.kind == "files":
            raise ValueError(f"{self.path} is loaded into memory; it has no DuckDB file")
        if self.sqlite_path is None:
            return self.path
        return duckdb_copy(self.sqlite_path, self.cache_dir)

    def connect(self) -> "sqlite3.Connection | duckdb.DuckDBPyConnection":
        """A new connection for one episode: a guarded SQLite connection, or a cursor on the
        shared read-only DuckDB instance."""
        if self.engine == "sqlite":
            return connect_sqlite(self.path)
        with self._lock:
            if self._instance is None:
                self._instance = self._open_duckdb()
            return self._instance.cursor()

    def acquire(self) -> Any:
        """A pooled connection for one query at a time; give it back with ``release``.
        (``list.pop``/``append`` are atomic: no lock on this hot path.)"""
        try:
            return self._idle.pop()
        except IndexError:
            return self.connect()

    def release(self, con: Any) -> None:
        self._idle.append(con)

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        """``acquire``/``release`` as a context manager."""
        con = self.acquire()
        try:
            yield con
        finally:
            self.release(con)

    def sqlite(self) -> sqlite3.Connection | None:
        """A plain read-only connection to the SQLite source (schema keys), or ``None``."""
        return None if self.sqlite_path is None else open_sqlite_readonly(self.sqlite_path)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
            for con in idle:
                con.close()
            if self._instance is not None:
                self._instance.close()
                self._instance = None

    def _open_duckdb(self) -> duckdb.DuckDBPyConnection:
        config: dict[str, Any] = {
            "autoload_known_extensions": False,
            "autoinstall_known_extensions": False,
            "threads": self.settings.threads,
            "memory_limit": self.settings.memory_limit,
        }
        if self.kind == "sqlite":
            config.update(SQLITE_COMPATIBLE)
        if self.kind == "files":
            con = duckdb.connect(":memory:", config=config)
            _load_files(con, self.path)
            con.execute("SET enable_external_access = false")
        else:
            config["enable_external_access"] = False
            con = duckdb.connect(str(self.duckdb_path), read_only=True, config=config)
        # DuckDB hands back its existing instance for a file already open in this process with
        # the same config (two SQLDatabase objects on one cached copy); that one is locked.
        locked = con.execute("SELECT current_setting('lock_configuration')").fetchone()[0]
        if not locked:
            con.execute("SET enable_progress_bar = false")
            con.execute("SET lock_configuration = true")
        return con

    def __repr__(self) -> str:
        return f"SQLDatabase({str(self.path)!r}, engine={self.engine!r})"


def _load_files(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """One table per Parquet/CSV file, named after the file."""
    files = sorted(p for p in ([path] if path.is_file() else path.iterdir())
                   if p.suffix.lower() in FILE_SUFFIXES)
    for file in files:
        reader = "read_parquet" if file.suffix.lower() == ".parquet" else "read_csv"
        name = '"' + file.stem.replace('"', '""') + '"'
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM {reader}(?)",
                    [str(file)])


_DATABASES: dict[tuple[str, EngineSettings, str, str | None], SQLDatabase] = {}
_BY_NAME: dict[tuple[str, EngineSettings, str, str | None], SQLDatabase] = {}
_DATABASES_LOCK = threading.Lock()


def open_database(db: "str | os.PathLike | SQLDatabase", settings: EngineSettings | None = None,
                  cache_dir: str | os.PathLike | None = None, *,
                  engine: str | None = None) -> SQLDatabase:
    """The process-wide ``SQLDatabase`` for a path and engine (or ``db`` itself if it is one).

    ``engine``: ``None`` (the database's own dialect: SQLite for a SQLite file, DuckDB for the
    rest), ``"sqlite"`` or ``"duckdb"``.
    """
    if isinstance(db, SQLDatabase):
        return db
    settings = settings or EngineSettings()
    named = (str(db), settings, str(cache_dir or ""), engine)
    found = _BY_NAME.get(named)  # the path as given: no file-system call on the hot path
    if found is not None:
        return found
    key = (str(Path(db).resolve()), settings, str(cache_dir or ""), check_engine(engine))
    with _DATABASES_LOCK:
        if key not in _DATABASES:
            _DATABASES[key] = SQLDatabase(db, settings, cache_dir, engine=engine)
        _BY_NAME[named] = _DATABASES[key]
        return _DATABASES[key]


def close_databases() -> None:
    """Close every shared instance (they reopen on next use), e.g. before deleting a cache."""
    with _DATABASES_LOCK:
        databases = list(_DATABASES.values())
        _DATABASES.clear()
        _BY_NAME.clear()
    for db in databases:
        db.close()
