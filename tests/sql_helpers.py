"""Shared pieces of the SQL tests: one conversion cache per test process, hashes, databases.

The harmful statements every engine must refuse or fail (``UNSAFE_SQLITE``, ``UNSAFE_DUCKDB``)
are shared by the tool and reward tests.  ``spider_db(db_id)`` opens a shipped Spider database on its own engine (SQLite);
``spider_db(db_id, "duckdb")`` on DuckDB, whose copies of the SQLite files are built once into
a temporary folder (about two seconds for all 19) and removed at exit.
"""

from __future__ import annotations

import atexit
import hashlib
import shutil
import sqlite3
import tempfile
from pathlib import Path

from tir_envs.bench.sql_quoting import QUOTES, quote_identifiers, schema_names  # noqa: F401
from tir_envs.data.spider import spider_databases
from tir_envs.protocols.skyrl_sql import SkyRLSQLProtocol
from tir_envs.tools.sql.database import SQLDatabase, open_database

ROOT = Path(tempfile.mkdtemp(prefix="tir-sql-tests-"))
CACHE = ROOT / "cache"
atexit.register(shutil.rmtree, ROOT, ignore_errors=True)
ENGINES = ("sqlite", "duckdb")

ATTACK_FILES = ("/tmp/tir_sql_attack.db", "/tmp/tir_sql_attack.csv", "/tmp/tir_sql_attack",
                "/tmp/tir_sql_vacuum.sqlite", "/tmp/tir_sql_attack2.db")

# Each must be refused or fail on SQLite; none may write, create a file or change the engine.
UNSAFE_SQLITE = [
    "INSERT INTO Pets VALUES (1, 'cat', 1, 1.0)",
    "INSERT OR REPLACE INTO Pets VALUES (2001, 'cat', 1, 1.0)",
    "REPLACE INTO Pets VALUES (2001, 'cat', 1, 1.0)",
    "UPDATE Pets SET weight = 0",
    "DELETE FROM Pets",
    "WITH x AS (SELECT 1) DELETE FROM Pets",
    "WITH x AS (SELECT 1) INSERT INTO Pets SELECT * FROM Pets",
    "DROP TABLE Pets",
    "CREATE TABLE x AS SELECT 1",
    "CREATE TEMP TABLE x AS SELECT 1",
    "CREATE VIEW v AS SELECT 1",
    "CREATE INDEX i ON Pets (weight)",
    "CREATE TRIGGER t AFTER INSERT ON Pets BEGIN DELETE FROM Pets; END",
    "CREATE VIRTUAL TABLE f USING fts5(x)",
    "ALTER TABLE Pets ADD COLUMN y INT",
    "ATTACH '/tmp/tir_sql_attack.db' AS x",
    "ATTACH ':memory:' AS m",
    "DETACH main",
    "VACUUM",
    "VACUUM INTO '/tmp/tir_sql_vacuum.sqlite'",
    "REINDEX",
    "ANALYZE",
    "BEGIN",
    "SAVEPOINT s",
    "PRAGMA journal_mode = WAL",
    "PRAGMA query_only = 0",
    "PRAGMA writable_schema = 1",
    "PRAGMA temp_store_directory = '/tmp'",
    "PRAGMA user_version = 7",
    "PRAGMA wal_checkpoint",
    "PRAGMA integrity_check",
    "SELECT load_extension('/tmp/evil.so')",
    "SELECT fts3_tokenizer('simple')",
    "SELECT zeroblob(2000000000)",
    "SELECT * FROM pragma_table_info('Pets')",
    ".tables",
    ".shell touch /tmp/tir_sql_attack",
    ".open /tmp/tir_sql_attack2.db",
    "SELECT 1; DROP TABLE Pets",
    "SELECT 1; SELECT 2",
    "SELECT 1; ATTACH '/tmp/tir_sql_attack2.db' AS y",
    "SELECT * FROM read_csv('/etc/passwd')",
]

# The same idea on DuckDB (its own statements and table functions).
UNSAFE_DUCKDB = [
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('/etc/hostname')",
    "SELECT * FROM '/etc/passwd'",
    "SELECT * FROM glob('/etc/*')",
    "ATTACH '/tmp/tir_sql_attack.db' AS x",
    "COPY (SELECT 1) TO '/tmp/tir_sql_attack.csv'",
    "COPY Pets FROM '/etc/passwd'",
    "EXPORT DATABASE '/tmp/tir_sql_attack'",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "SET lock_configuration = false",
    "SET default_null_order = 'nulls_last'",
    "PRAGMA threads = 8",
    "RESET lock_configuration",
    "INSERT INTO Pets VALUES (1, 'cat', 1, 1.0)",
    "UPDATE Pets SET weight = 0",
    "DELETE FROM Pets",
    "DROP TABLE Pets",
    "CREATE TABLE x AS SELECT 1",
    "CREATE TEMP TABLE x AS SELECT 1",
    "ALTER TABLE Pets ADD COLUMN y INT",
    "CHECKPOINT",
    "VACUUM",
    "DETACH memory",
    "USE system",
    "CALL pragma_version()",
    "SELECT 1; DROP TABLE Pets",
    "SELECT 1; SELECT 2",
    "SELECT * FROM sqlite_scan('/etc/passwd', 'x')",
]


def spider_db(db_id: str, engine: str | None = None) -> SQLDatabase:
    return open_database(spider_databases()[db_id], cache_dir=CACHE, engine=engine)


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def folder_listing(path: Path) -> set[str]:
    return {p.name for p in Path(path).iterdir()}


def make_sqlite(path: Path, script: str) -> Path:
    """A small SQLite database built from ``script`` (for tests that need odd data)."""
    con = sqlite3.connect(path)
    con.executescript(script)
    con.commit()
    con.close()
    return path


def _no_schema(task) -> tuple[str, str]:
    return "sqlite", ""


#: the SkyRL-SQL protocol, to read final actions offline as the env does (no prompt rendered)
SQL_PROTOCOL = SkyRLSQLProtocol(_no_schema)
