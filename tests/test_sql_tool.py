"""The SQL tool on real SQLite and DuckDB: safety, read-only files, timeouts, caps, engines,
schemas, sessions opened from the task, conversion."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import shutil
import sqlite3

import duckdb
import pytest

from tests.sql_helpers import (ATTACK_FILES, CACHE, UNSAFE_DUCKDB, UNSAFE_SQLITE,
                               folder_listing, make_sqlite, sha256, spider_db)
from tir_envs.data.spider import spider_databases
from tir_envs.task import Task
from tir_envs.tools.base import Status
from tir_envs.tools.sql import (SQLDatabase, SQLTool, describe_database, find_database,
                                open_database, render_table, run_query)
from tir_envs.tools.sql.convert import cache_root, duckdb_copy, duckdb_type
from tir_envs.tools.sql.dialect import adapt
from tir_envs.tools.sql.lexer import has_outer_order_by, split_statements
from tir_envs.tools.sql.schema import SchemaStyle, render_schema
from tir_envs.tools.sql.tool import ResultLimits

def run(db, sql, timeout_s=5.0, max_rows=100, **kw):
    con = db.connect()
    try:
        return run_query(con, sql, timeout_s=timeout_s, max_rows=max_rows, **kw)
    finally:
        con.close()


@pytest.fixture
def pets_copy(tmp_path):
    """The pets database alone in a folder of its own, so any new file next to it shows."""
    folder = tmp_path / "db"
    folder.mkdir()
    path = folder / "pets_1.sqlite"
    shutil.copyfile(spider_databases()["pets_1"], path)
    yield path
    for leftover in ATTACK_FILES:
        if os.path.isdir(leftover):
            shutil.rmtree(leftover, ignore_errors=True)
        elif os.path.exists(leftover):
            os.unlink(leftover)


def _attack(db, statements, files):
    before = {f: sha256(f) for f in files}
    listings = {f.parent: folder_listing(f.parent) for f in files}
    con = db.connect()  # one episode's connection tries everything in turn
    try:
        for sql in statements:
            result = run_query(con, sql, timeout_s=5, max_rows=100)
            assert result.status in ("refused", "error"), (sql, result)
            assert not result.rows, sql
        assert run_query(con, "SELECT count(*) FROM Pets", timeout_s=5,
                         max_rows=5).rows == [(3,)]  # data intact, connection still usable
    finally:
        con.close()
    assert {f: sha256(f) for f in files} == before
    assert {d: folder_listing(d) for d in listings} == listings  # no -journal, -wal, copies
    for leftover in ATTACK_FILES:
        assert not os.path.exists(leftover), leftover


def test_sqlite_refuses_every_harmful_statement_and_leaves_no_trace(pets_copy):
    db = SQLDatabase(pets_copy)
    assert db.engine == "sqlite" and db.engine_name == "SQLite"
    _attack(db, UNSAFE_SQLITE, [pets_copy])
    db.close()


def test_duckdb_refuses_every_harmful_statement_and_leaves_no_trace(pets_copy, tmp_path):
    db = SQLDatabase(pets_copy, cache_dir=tmp_path / "cache", engine="duckdb")
    copy = db.duckdb_path
    _attack(db, UNSAFE_DUCKDB, [pets_copy, copy])
    db.close()


def test_refusals_say_why():
    sqlite_db, duck = spider_db("pets_1"), spider_db("pets_1", "duckdb")
    assert "ATTACH statements are not allowed" in run(sqlite_db, "ATTACH 'x.db' AS x").error
    assert "ATTACH statements are not allowed" in run(duck, "ATTACH 'x.db'").error
    for db in (sqlite_db, duck):
        assert "run one SELECT statement at a time" in run(db, "SELECT 1; SELECT 2").error
        assert "empty" in run(db, " ; -- nothing").error
        assert run(db, "SELECT 1;").rows == [(1,)]  # one terminating semicolon is fine
        assert run(db, "WITH x AS (SELECT 1 AS a) SELECT a FROM x").rows == [(1,)]
    assert "command of the sqlite3 shell" in run(sqlite_db, ".schema Pets").error
    assert "not authorized" in run(sqlite_db, "PRAGMA journal_mode = WAL").error
    assert "Permission Error" in run(duck, "SELECT * FROM read_csv('/etc/passwd')").error
    assert run(sqlite_db, "PRAGMA table_info(Pets)").ok
    assert run(duck, "DESCRIBE Pets").ok and run(duck, "SHOW TABLES").ok
    assert run(duck, "PRAGMA table_info('Pets')").ok


def test_sqlite_reads_the_dialect_verbatim():
    db = spider_db("world_1")
    # a double-quoted word that is not a column is a string; a bare column next to max()
    assert run(db, 'SELECT count(*) FROM country WHERE Continent = "Europe"').rows == [(46,)]
    top = run(db, "SELECT Name, max(Population) FROM country").rows
    assert top == [("China", 1277558000)]
    assert run(db, "SELECT 7 / 2, -7 / 2, `Name` FROM country WHERE Code = 'ABW'").rows == \
        [(3, -3, "Aruba")]
    like = run(db, "SELECT count(*) FROM country WHERE Name LIKE 'ar%'").rows
    assert like == run(db, "SELECT count(*) FROM country WHERE Name LIKE 'AR%'").rows
    assert like[0][0] > 0


def test_duckdb_on_sqlite_takes_sqlites_conventions_where_it_has_a_setting():
    sq, duck = spider_db("world_1"), spider_db("world_1", "duckdb")
    for sql in ("SELECT Name FROM country ORDER BY LifeExpectancy LIMIT 3",
                "SELECT Name FROM country ORDER BY LifeExpectancy DESC LIMIT 3",
                "SELECT sum(Population) / count(*) FROM country",
                "SELECT -7 / 2"):
        assert run(sq, sql).rows == run(duck, sql).rows, sql
    assert run(sq, "SELECT Name FROM country ORDER BY LifeExpectancy LIMIT 1").rows[0][0] == \
        "Antarctica"  # NULL life expectancy sorts first, as on SQLite


@pytest.mark.parametrize("engine", ["sqlite", "duckdb"])
def test_timeout_interrupts_and_the_connection_still_works(engine):
    db = spider_db("world_1", engine)
    con = db.connect()
    slow = run_query(con, "SELECT count(*) FROM city a, city b, city c "
                          "WHERE a.Population + b.Population > c.Population",
                     timeout_s=0.3, max_rows=10)
    assert slow.status == "timeout" and "0.3 s" in slow.error
    assert slow.elapsed_s < 5
    assert run_query(con, "SELECT count(*) FROM city", timeout_s=5, max_rows=10).rows == [(4079,)]
    endless = run_query(con, "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
                             "SELECT count(*) FROM r", timeout_s=0.3, max_rows=10)
    assert endless.status == "timeout"
    con.close()


@pytest.mark.parametrize("engine", ["sqlite", "duckdb"])
def test_errors_come_back_as_results(engine):
    db = spider_db("pets_1", engine)
    for sql in ("SELEC 1", "SELECT nope FROM Pets", "SELECT * FROM nope", "SELECT 'unterminated",
                "SELECT PetID FROM Pets WHERE"):
        result = run(db, sql)
        assert result.status == "error" and result.error, sql
        assert "extensions.duckdb.org" not in result.error


@pytest.mark.parametrize("engine", ["sqlite", "duckdb"])
def test_row_and_size_caps(engine):
    db = spider_db("world_1", engine)
    capped = run(db, "SELECT Name FROM city", max_rows=10)
    assert capped.ok and len(capped.rows) == 10 and capped.more_rows
    exact = run(db, "SELECT Name FROM city LIMIT 10", max_rows=10)
    assert len(exact.rows) == 10 and not exact.more_rows
    big = run(db, "SELECT Name, District, CountryCode FROM city", max_rows=10_000,
              max_bytes=20_000)
    assert big.status == "error" and "larger than" in big.error


def test_lexer_statements_and_outer_order():
    assert split_statements("SELECT 1; SELECT ';' -- ; \n; ") == ["SELECT 1", "SELECT ';' -- ;"]
    assert split_statements("SELECT [a;b] FROM t") == ["SELECT [a;b] FROM t"]
    assert split_statements("-- only a comment\n;") == []
    assert has_outer_order_by("SELECT a FROM t ORDER BY a")
    assert has_outer_order_by("SELECT a FROM t UNION SELECT b FROM u ORDER BY 1")
    assert not has_outer_order_by("SELECT a FROM (SELECT a FROM t ORDER BY a) s")
    assert not has_outer_order_by("SELECT 'ORDER BY' FROM t")
    assert not has_outer_order_by("SELECT a FROM t -- ORDER BY a")
    assert not has_outer_order_by("SELECT a FROM t /* ORDER BY a */")
    assert not has_outer_order_by('SELECT "order by" FROM t')
    assert not has_outer_order_by("SELECT rank() OVER (ORDER BY a) FROM t")


def test_dialect_rewrites_only_outside_literals():
    assert adapt("SELECT `a b`, 'x`y' FROM `t` -- `c`") == \
        "SELECT \"a b\", 'x`y' FROM \"t\" -- `c`"
    assert adapt("SELECT * FROM t WHERE n LIKE 'a%' AND m NOT like '%LIKE%'") == \
        "SELECT * FROM t WHERE n ILIKE 'a%' AND m NOT ILIKE '%LIKE%'"
    assert adapt('SELECT "like" FROM t') == 'SELECT "like" FROM t'


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


def _pets_task(**meta):
    return Task("pets_1/x", "How many pets?", "SELECT count(*) FROM Pets", meta)


def _episode(tool, task, queries):
    async def go():
        session = await tool.open_session(task)
        try:
            return [await tool.call({"query": q}, session) for q in queries], session
        finally:
            await tool.close_session(session)
    return asyncio.run(go())


@pytest.mark.parametrize("engine", [None, "duckdb"])
def test_tool_session_from_the_task_renders_results_and_statuses(engine):
    tool = SQLTool(timeout_s=0.3, limits=ResultLimits(max_rows=2), engine=engine,
                   cache_dir=CACHE)
    task = _pets_task(db_path=str(spider_databases()["pets_1"]))
    (ok, bad, empty, slow, refused), session = _episode(tool, task, [
        "SELECT PetID, PetType FROM Pets ORDER BY PetID", "SELECT nope", "  ",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r",
        "DELETE FROM Pets"])
    assert isinstance(session, sqlite3.Connection) == (engine is None)
    assert ok.status == Status.OK
    assert ok.text == ("PetID | PetType\n---------------\n2001 | cat\n2002 | dog\n"
                       "[cut: showing the first 2 of 3 rows]")
    assert ok.metadata["rows"] == 3
    assert bad.status == Status.ERROR and bad.text.startswith("Error: ")
    assert "nope" in bad.text
    assert empty.status == Status.ERROR and "empty" in empty.text
    assert slow.status == Status.TIMEOUT and "time limit" in slow.text
    assert refused.status == Status.ERROR and "statement refused" in refused.text


def test_one_connection_per_episode_and_the_tool_is_never_mutated(tmp_path):
    tool = SQLTool()
    state = dict(vars(tool))
    pets = _pets_task(db_path=str(spider_databases()["pets_1"]))
    singer = Task("singer/x", "q", "SELECT 1", {"db_id": "singer",
                                                "db_dir": str(spider_databases()["singer"].parent)})

    async def two_episodes():
        a, b = await tool.open_session(pets), await tool.open_session(singer)
        try:
            assert a is not b
            ra = await tool.call({"query": "SELECT count(*) FROM Pets"}, a)
            rb = await tool.call({"query": "SELECT count(*) FROM singer"}, b)
            return ra, rb
        finally:
            await tool.close_session(a)
            await tool.close_session(b)

    ra, rb = asyncio.run(two_episodes())
    assert ra.text.startswith("count(*)\n") and "\n3\n" in ra.text
    assert "\n8\n" in rb.text
    assert vars(tool) == state


def test_missing_databases_and_bad_arguments_fail_clearly(tmp_path):
    with pytest.raises(RuntimeError, match="needs the episode's task"):
        asyncio.run(SQLTool().open_session())
    with pytest.raises(ValueError, match="names no database"):
        asyncio.run(SQLTool().open_session(_pets_task()))
    with pytest.raises(FileNotFoundError, match="no database for db_id 'zoo'"):
        asyncio.run(SQLTool(db_dir=tmp_path).open_session(_pets_task(db_id="zoo")))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        asyncio.run(SQLTool().open_session(_pets_task(db_path=str(tmp_path / "x.sqlite"))))
    with pytest.raises(ValueError, match="engine must be one of"):
        SQLTool(engine="postgres")
    with pytest.raises(ValueError, match="max_rows must be a positive int"):
        ResultLimits(max_rows=0)
    with pytest.raises(ValueError, match="timeout_s must be positive"):
        SQLTool(timeout_s=0)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        open_database("/nonexistent/x.sqlite")
    native = tmp_path / "n.duckdb"
    duckdb.connect(str(native)).close()
    with pytest.raises(ValueError, match="not a SQLite file"):
        SQLDatabase(native, engine="sqlite")


def test_find_database_layouts(tmp_path):
    src = spider_databases()["pets_1"]
    (tmp_path / "pets_1").mkdir()
    shutil.copyfile(src, tmp_path / "pets_1" / "pets_1.sqlite")
    assert find_database("pets_1", tmp_path) == tmp_path / "pets_1" / "pets_1.sqlite"
    skyrl = tmp_path / "SynSQL-2.5M" / "databases" / "zoo"
    skyrl.mkdir(parents=True)
    shutil.copyfile(src, skyrl / "zoo.sqlite")
    assert find_database("zoo", tmp_path, data="synsql") == skyrl / "zoo.sqlite"
    with pytest.raises(FileNotFoundError, match="no database for db_id 'zoo'"):
        find_database("zoo", tmp_path)


def test_parquet_and_csv_files_are_queried_with_duckdb(tmp_path):
    folder = tmp_path / "files"
    folder.mkdir()
    duckdb.sql(f"COPY (SELECT range AS id, 'n' || range AS name FROM range(5)) "
               f"TO '{folder / 'people.parquet'}' (FORMAT parquet)")
    duckdb.sql(f"COPY (SELECT 1 AS id, 42 AS score) TO '{folder / 'scores.csv'}' (HEADER)")
    before = {p.name: sha256(p) for p in folder.iterdir()}
    db = SQLDatabase(folder)
    assert db.engine_name == "DuckDB"
    assert run(db, "SELECT p.name, s.score FROM people p JOIN scores s USING (id)").rows == \
        [("n1", 42)]
    for sql in ("SELECT * FROM read_parquet('" + str(folder / "people.parquet") + "')",
                "DROP TABLE people", "COPY people TO '/tmp/tir_sql_attack.csv'"):
        assert run(db, sql).status in ("refused", "error"), sql
    assert run(db, "SELECT count(*) FROM people").rows == [(5,)]
    single = SQLDatabase(folder / "scores.csv")
    assert run(single, "SELECT score FROM scores").rows == [(42,)]
    assert {p.name: sha256(p) for p in folder.iterdir()} == before
    assert not os.path.exists("/tmp/tir_sql_attack.csv")
    db.close()
    single.close()


def test_two_handles_on_one_cached_copy_share_the_locked_instance():
    path = spider_databases()["singer"]
    first = SQLDatabase(path, cache_dir=CACHE, engine="duckdb")
    second = SQLDatabase(path, cache_dir=CACHE, engine="duckdb")
    for db in (first, second):
        assert run(db, "SELECT count(*) FROM singer").rows == [(8,)]
        assert run(db, "SELECT current_setting('lock_configuration')").rows == [(True,)]
        assert run(db, "SET lock_configuration = false").status in ("refused", "error")
    first.close()
    second.close()


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
    db = open_database(src, cache_dir=cache, engine="duckdb")
    types = dict(run(db, "SELECT column_name, data_type FROM information_schema.columns "
                         "WHERE table_name = 'm'").rows)
    assert types == {"i": "BIGINT", "r": "DOUBLE", "d": "DOUBLE", "s": "VARCHAR",
                     "dt": "VARCHAR", "v": "VARCHAR", "mixed": "VARCHAR", "b": "BLOB",
                     "odd name": "VARCHAR"}
    rows = run(db, 'SELECT i, r, d, s, dt, v, mixed, b, "odd name" FROM m ORDER BY rowid').rows
    assert rows[0] == (1, 1.5, 2.25, "x", "2018-03-17 07:48:09", "007", "3", b"\x00\xff", "a")
    assert rows[1] == (None, None, None, "NULL", None, "", "abc", None, None)
    assert sha256(src) == before
    con = sqlite3.connect(src)  # an edited source gets a new copy
    con.execute("INSERT INTO m (i) VALUES (3)")
    con.commit()
    con.close()
    assert duckdb_copy(src, cache) != path
    assert duckdb_type("FLOAT(10,2)") == "DOUBLE" and duckdb_type("") == "VARCHAR"


def test_schema_in_the_engines_own_types_with_keys_and_sample_rows():
    text = render_schema(spider_db("pets_1"))
    assert "CREATE TABLE Has_Pet (\n  StuID INTEGER,\n  PetID INTEGER,\n" in text
    assert "PetType VARCHAR(20)" in text  # SQLite: the declared type as written
    assert "FOREIGN KEY (PetID) REFERENCES Pets (PetID)" in text
    assert "PRIMARY KEY (StuID)" in text
    assert "/* 3 example rows of Pets:\nPetID | PetType | pet_age | weight" in text
    duck = render_schema(spider_db("pets_1", "duckdb"))
    assert "CREATE TABLE Has_Pet (\n  StuID BIGINT,\n  PetID BIGINT,\n" in duck
    bare = render_schema(spider_db("pets_1"), SchemaStyle(sample_rows=0))
    assert "example rows" not in bare and "CREATE TABLE Student" in bare
    one = render_schema(spider_db("tvshow"), SchemaStyle(sample_rows=1))
    assert '"18_49_Rating_Share" TEXT' in one and "/* 1 example row of Cartoon:" in one


def test_describe_database_names_the_engine_that_runs():
    task = _pets_task(db_path=str(spider_databases()["pets_1"]))
    name, text = describe_database(task)
    assert name == "SQLite" and text == render_schema(spider_db("pets_1"))
    name, text = describe_database(task, engine="duckdb", cache_dir=CACHE)
    assert name == "DuckDB" and "StuID BIGINT" in text


@pytest.mark.parametrize("engine", ["sqlite", "duckdb"])
def test_every_shipped_database_renders(engine):
    for db_id in spider_databases():
        db = spider_db(db_id, engine)
        text = render_schema(db)
        tables = run(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
                     if engine == "sqlite" else "SELECT count(*) FROM duckdb_tables()").rows
        assert text.count("CREATE TABLE") == tables[0][0], db_id


def test_text_that_is_not_utf8_is_replaced_not_fatal(tmp_path):
    path = make_sqlite(tmp_path / "latin1.sqlite", "CREATE TABLE t (x TEXT); "
                       "INSERT INTO t VALUES (CAST(x'43616665e9' AS TEXT)), ('ok');")
    result = run(SQLDatabase(path), "SELECT x FROM t ORDER BY rowid")
    assert result.ok and result.rows == [("Cafe\ufffd",), ("ok",)]
