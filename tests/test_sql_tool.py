"""The SQL tool on real DuckDB: safety, read-only files, timeouts, result tables, conversion."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from tests.sql_helpers import CACHE, folder_listing, make_sqlite, sha256, spider_db
from tir_envs.data.spider import spider_databases
from tir_envs.tools.base import ToolStatus
from tir_envs.tools.sql import SQLDatabase, SQLTool, open_database, render_table, run_query
from tir_envs.tools.sql.convert import cache_root, duckdb_copy, duckdb_type
from tir_envs.tools.sql.dialect import adapt
from tir_envs.tools.sql.lexer import has_outer_order_by
from tir_envs.tools.sql.schema import SchemaStyle, render_schema
from tir_envs.tools.sql.tool import ResultLimits

# Each must be refused or fail; none may read a file, write, or change the engine.
UNSAFE = [
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
    "DETACH memory",
    "USE system",
    "CALL pragma_version()",
    "SELECT 1; DROP TABLE Pets",
    "SELECT 1; SELECT 2",
    "SELECT * FROM sqlite_scan('/etc/passwd', 'x')",
]


def run(db, sql, timeout_s=5.0, max_rows=100):
    con = db.connect()
    try:
        return run_query(con, sql, timeout_s=timeout_s, max_rows=max_rows)
    finally:
        con.close()


def test_unsafe_statements_are_refused_and_files_unchanged(tmp_path):
    db = spider_db("pets_1")
    before = sha256(db.sqlite_path), sha256(db.duckdb_path)
    listing = folder_listing(db.sqlite_path.parent), folder_listing(db.duckdb_path.parent)
    for sql in UNSAFE:
        result = run(db, sql)
        assert result.status in ("refused", "error"), (sql, result)
        assert not result.rows
    assert run(db, "SELECT count(*) FROM Pets").rows == [(3,)]  # data intact
    assert (sha256(db.sqlite_path), sha256(db.duckdb_path)) == before
    assert (folder_listing(db.sqlite_path.parent), folder_listing(db.duckdb_path.parent)) == listing
    for leftover in ("/tmp/tir_sql_attack.db", "/tmp/tir_sql_attack.csv", "/tmp/tir_sql_attack"):
        assert not __import__("os").path.exists(leftover)


def test_refusals_say_why():
    db = spider_db("pets_1")
    assert "ATTACH statements are not allowed" in run(db, "ATTACH 'x.db'").error
    assert "run one SELECT statement at a time" in run(db, "SELECT 1; SELECT 2").error
    assert "Permission Error" in run(db, "SELECT * FROM read_csv('/etc/passwd')").error
    assert run(db, "DESCRIBE Pets").ok and run(db, "SHOW TABLES").ok
    assert run(db, "PRAGMA table_info('Pets')").ok
    assert run(db, "WITH x AS (SELECT 1 AS a) SELECT a FROM x").rows == [(1,)]


def test_timeout_interrupts_and_the_connection_still_works():
    db = spider_db("world_1")
    con = db.connect()
    slow = run_query(con, "SELECT count(*) FROM city a, city b, city c "
                          "WHERE a.Population + b.Population > c.Population",
                     timeout_s=0.3, max_rows=10)
    assert slow.status == "timeout" and "0.3 s" in slow.error
    assert slow.elapsed_s < 5
    assert run_query(con, "SELECT count(*) FROM city", timeout_s=5, max_rows=10).rows == [(4079,)]
    con.close()


def test_errors_come_back_as_results():
    db = spider_db("pets_1")
    for sql in ("SELEC 1", "SELECT nope FROM Pets", "SELECT * FROM nope", "SELECT 'unterminated",
                "SELECT CAST('x' AS INT)"):
        result = run(db, sql)
        assert result.status == "error" and result.error, sql
        assert "extensions.duckdb.org" not in result.error


def test_dialect_rewrites_only_outside_literals():
    assert adapt("SELECT `a b`, 'x`y' FROM `t` -- `c`") == \
        "SELECT \"a b\", 'x`y' FROM \"t\" -- `c`"
    assert adapt("SELECT * FROM t WHERE n LIKE 'a%' AND m NOT like '%LIKE%'") == \
        "SELECT * FROM t WHERE n ILIKE 'a%' AND m NOT ILIKE '%LIKE%'"
    assert adapt('SELECT "like" FROM t') == 'SELECT "like" FROM t'
    assert has_outer_order_by("SELECT a FROM t ORDER BY a")
    assert not has_outer_order_by("SELECT a FROM (SELECT a FROM t ORDER BY a) s")
    assert not has_outer_order_by("SELECT 'ORDER BY' FROM t")


def test_render_table_caps_and_marks_cuts():
    text = render_table(["a", "b"], [(1, None), (2.5, "x\ny")])
    assert text == "a | b\n-----\n1 | NULL\n2.5 | x\\ny\n(2 rows)"
    many = render_table(["n"], [(i,) for i in range(200)], max_rows=10)
    assert many.splitlines()[-1] == "[cut: showing the first 10 of 200 rows]"
    assert len(many.splitlines()) == 2 + 10 + 1
    more = render_table(["n"], [(i,) for i in range(20)], more_rows=True, max_rows=5)
    assert more.endswith("[cut: showing the first 5 rows; the result has more than 20]")
    wide = render_table(["s"], [("y" * 500,)] * 30, max_chars=1000, max_cell_chars=100)
    assert len(wide) <= 1000 and "…" in wide and "[cut: showing the first" in wide
    huge = render_table(["s"], [("z" * 5000,)], max_chars=300, max_cell_chars=10000)
    assert len(huge) <= 300 and "…" in huge
    assert render_table(["a"], []) == "a\n-\n(0 rows)"
    assert "2018-03-17 07:48:09" in render_table(["d"], [(dt.datetime(2018, 3, 17, 7, 48, 9),)])


def test_tool_call_renders_results_and_statuses():
    tool = SQLTool(spider_db("pets_1"), timeout_s=0.3, limits=ResultLimits(max_rows=2))

    async def episode():
        session = await tool.open_session()
        try:
            ok = await tool.call({"query": "SELECT PetID, PetType FROM Pets ORDER BY PetID"},
                                 session)
            bad = await tool.call({"query": "SELECT nope"}, session)
            empty = await tool.call({"query": "  "}, session)
            slow = await tool.call({"query": "SELECT count(*) FROM range(1000000000) a, "
                                             "range(1000) b"}, session)
            return ok, bad, empty, slow
        finally:
            await tool.close_session(session)

    ok, bad, empty, slow = asyncio.run(episode())
    assert ok.status == ToolStatus.OK
    assert ok.text == ("PetID | PetType\n---------------\n2001 | cat\n2002 | dog\n"
                       "[cut: showing the first 2 of 3 rows]")
    assert ok.metadata["rows"] == 3
    assert bad.status == ToolStatus.ERROR and bad.text.startswith("Error: Binder Error")
    assert empty.status == ToolStatus.ERROR and "empty" in empty.text
    assert slow.status == ToolStatus.TIMEOUT and "time limit" in slow.text


def test_two_handles_on_one_cached_copy_share_the_locked_instance():
    path = spider_databases()["singer"]
    first, second = SQLDatabase(path, cache_dir=CACHE), SQLDatabase(path, cache_dir=CACHE)
    for db in (first, second):
        assert run(db, "SELECT count(*) FROM singer").rows == [(8,)]
        assert run(db, "SELECT current_setting('lock_configuration')").rows == [(True,)]
        assert run(db, "SET lock_configuration = false").status in ("refused", "error")
    first.close()
    second.close()


def test_tool_without_database_and_bad_limits():
    with pytest.raises(RuntimeError, match="bind"):
        asyncio.run(SQLTool().open_session())
    with pytest.raises(ValueError, match="max_rows must be a positive int"):
        ResultLimits(max_rows=0)
    with pytest.raises(ValueError, match="timeout_s must be positive"):
        SQLTool(timeout_s=0)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        open_database("/nonexistent/x.sqlite")


def test_conversion_types_repairs_and_cache(tmp_path):
    src = make_sqlite(tmp_path / "odd.sqlite", """
        CREATE TABLE m (i INTEGER, r REAL, d DECIMAL(10,2), s TEXT, dt DATETIME, v VARCHAR(5),
                        mixed INTEGER, b BLOB, "odd name" TEXT);
        INSERT INTO m VALUES (1, 1.5, 2.25, 'x', '2018-03-17 07:48:09', '007', 3, x'00ff', 'a');
        INSERT INTO m VALUES ('NULL', 'null', NULL, 'NULL', NULL, '', 'abc', NULL, NULL);
    """)
    before = sha256(src)
    cache = tmp_path / "cache"
    path = duckdb_copy(src, cache)
    assert path.parent == cache_root(cache) and path.name.startswith("odd-")
    assert duckdb_copy(src, cache) == path  # built once, then reused
    db = open_database(src, cache_dir=cache)
    types = dict(run(db, "SELECT column_name, data_type FROM information_schema.columns "
                         "WHERE table_name = 'm'").rows)
    assert types == {"i": "BIGINT", "r": "DOUBLE", "d": "DOUBLE", "s": "VARCHAR",
                     "dt": "VARCHAR", "v": "VARCHAR", "mixed": "VARCHAR", "b": "BLOB",
                     "odd name": "VARCHAR"}
    rows = run(db, 'SELECT i, r, d, s, dt, v, mixed, b, "odd name" FROM m ORDER BY rowid').rows
    assert rows[0] == (1, 1.5, 2.25, "x", "2018-03-17 07:48:09", "007", "3", b"\x00\xff", "a")
    assert rows[1] == (None, None, None, "NULL", None, "", "abc", None, None)
    assert sha256(src) == before
    con = __import__("sqlite3").connect(src)  # an edited source gets a new copy
    con.execute("INSERT INTO m (i) VALUES (3)")
    con.commit()
    con.close()
    assert duckdb_copy(src, cache) != path
    assert duckdb_type("FLOAT(10,2)") == "DOUBLE" and duckdb_type("") == "VARCHAR"


def test_schema_shows_types_keys_and_sample_rows():
    db = spider_db("pets_1")
    text = render_schema(db)
    assert "CREATE TABLE Has_Pet (\n  StuID BIGINT,\n  PetID BIGINT,\n" in text
    assert "FOREIGN KEY (PetID) REFERENCES Pets (PetID)" in text
    assert "PRIMARY KEY (StuID)" in text
    assert "/* 3 example rows of Pets:\nPetID | PetType | pet_age | weight" in text
    bare = render_schema(db, SchemaStyle(sample_rows=0))
    assert "example rows" not in bare and "CREATE TABLE Student" in bare
    one = render_schema(spider_db("tvshow"), SchemaStyle(sample_rows=1))
    assert '"18_49_Rating_Share" VARCHAR' in one and "/* 1 example row of Cartoon:" in one


def test_every_shipped_database_converts_and_renders():
    for db_id in spider_databases():
        db = spider_db(db_id)
        text = render_schema(db)
        assert text.count("CREATE TABLE") == len(run(db, "SHOW TABLES").rows), db_id
