"""Execution match and the SQL reward: the convention, perturbation by perturbation, on both
engines; column mapping; ties; empty results; attacks; the reward's typed outcome."""

from __future__ import annotations

import datetime as dt
import decimal
import os
import random

import pytest

from tests.sql_helpers import (ATTACK_FILES, CACHE, ENGINES, SQL_PROTOCOL, UNSAFE_DUCKDB,
                               UNSAFE_SQLITE, folder_listing, make_sqlite, sha256, spider_db)
from tir_envs.answers.tags import extract_solution
from tir_envs.rewards.sql import (GoldQueryError, SQLReward, execution_match,
                                  gold_result, match)
from tir_envs.rewards.sql_compare import column_mappings, multiset_equal, normalize_value
from tir_envs.rewards.sql_ordering import with_sort_keys
from tir_envs.task import Task
from tir_envs.tools.sql.database import open_database
from tir_envs.trajectory import Trajectory

SCRIPT = """
CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, score REAL, grp TEXT);
INSERT INTO t VALUES (1, 'alice', 9.5, 'a'), (2, 'bob', 7.0, 'b'), (3, 'carol', 9.5, 'a'),
                     (4, 'dave', 3.25, 'b'), (5, 'erin', NULL, 'c'), (6, 'Alan', 7.0, 'c');
CREATE TABLE g (grp TEXT, label TEXT);
INSERT INTO g VALUES ('a', 'Alpha'), ('b', 'Beta'), ('c', 'Gamma'), ('a', 'First');
CREATE TABLE n (k INTEGER, v INTEGER);
INSERT INTO n VALUES (1, 7), (2, 2);
"""

# (convention, gold, prediction, expected verdict) — the same on SQLite and on DuckDB.
PERTURBATIONS = [
    # columns may be permuted, consistently; never dropped, added, or mapped row by row
    ("columns permuted", "SELECT name, grp FROM t", "SELECT grp, name FROM t", True),
    ("count first", "SELECT grp, count(*) FROM t GROUP BY grp",
     "SELECT count(*), grp FROM t GROUP BY grp", True),
    ("permuted and ordered", "SELECT name, score FROM t ORDER BY score DESC, name",
     "SELECT score, name FROM t ORDER BY score DESC, name", True),
    ("no consistent mapping", "SELECT id, 7 - id FROM t WHERE id IN (3, 4)",
     "SELECT id, id FROM t WHERE id IN (3, 4)", False),
    ("SELECT * for one column", "SELECT name FROM t WHERE grp = 'a'",
     "SELECT * FROM t WHERE grp = 'a'", False),
    ("extra column", "SELECT name FROM t", "SELECT name, grp FROM t", False),
    ("missing column", "SELECT name, grp FROM t", "SELECT name FROM t", False),
    # order counts only when the gold's outermost query has ORDER BY
    ("ORDER BY removed", "SELECT name FROM t ORDER BY name", "SELECT name FROM t", False),
    ("order reversed", "SELECT name FROM t ORDER BY id", "SELECT name FROM t ORDER BY id DESC",
     False),
    ("gold unordered, prediction ordered", "SELECT name FROM t WHERE grp = 'a'",
     "SELECT name FROM t WHERE grp = 'a' ORDER BY id DESC", True),
    ("ORDER BY only in a subquery",
     "SELECT name FROM (SELECT name FROM t ORDER BY name LIMIT 10) AS s",
     "SELECT name FROM t ORDER BY name DESC", True),
    ("ORDER BY only in a string", "SELECT name, 'ORDER BY name' FROM t",
     "SELECT name, 'ORDER BY name' FROM t ORDER BY id DESC", True),
    ("ORDER BY only in a comment", "SELECT name FROM t -- ORDER BY name",
     "SELECT name FROM t ORDER BY id DESC", True),
    ("ORDER BY in a window", "SELECT name, rank() OVER (ORDER BY id) FROM t",
     "SELECT name, rank() OVER (ORDER BY id) FROM t ORDER BY id DESC", True),
    # rows tied on the ORDER BY keys may come in any order; under LIMIT any tied row counts
    ("ties in any order", "SELECT name, score FROM t WHERE score IS NOT NULL ORDER BY score",
     "SELECT name, score FROM t WHERE score IS NOT NULL ORDER BY score, name DESC", True),
    ("ties, runs crossed", "SELECT name, score FROM t WHERE score IS NOT NULL ORDER BY score",
     "SELECT name, score FROM t WHERE score IS NOT NULL ORDER BY score DESC", False),
    ("tie under LIMIT, other row", "SELECT name FROM t ORDER BY score DESC LIMIT 1",
     "SELECT 'carol'", True),
    ("tie under LIMIT, same row", "SELECT name FROM t ORDER BY score DESC LIMIT 1",
     "SELECT 'alice'", True),
    ("not a tied row", "SELECT name FROM t ORDER BY score DESC LIMIT 1", "SELECT 'bob'", False),
    ("all tied rows instead of LIMIT 1", "SELECT name FROM t ORDER BY score DESC LIMIT 1",
     "SELECT name FROM t WHERE score > 9", False),
    # DISTINCT never stripped; duplicates count
    ("DISTINCT removed", "SELECT DISTINCT grp FROM t", "SELECT grp FROM t", False),
    ("DISTINCT added", "SELECT grp FROM t", "SELECT DISTINCT grp FROM t", False),
    ("duplicated rows from a join", "SELECT name FROM t WHERE grp IN (SELECT grp FROM g)",
     "SELECT t.name FROM t JOIN g ON t.grp = g.grp", False),
    ("join deduplicated", "SELECT DISTINCT t.name FROM t JOIN g ON t.grp = g.grp",
     "SELECT name FROM t WHERE grp IN (SELECT grp FROM g)", True),
    ("rows repeated", "SELECT name FROM t WHERE grp = 'a'",
     "SELECT name FROM t WHERE grp = 'a' UNION ALL SELECT name FROM t WHERE grp = 'a'", False),
    # floats within a tolerance; a rounded value is a different value
    ("float evaluation order", "SELECT avg(score) FROM t",
     "SELECT sum(score) / count(score) FROM t", True),
    ("float noise", "SELECT 0.3", "SELECT 0.1 + 0.2", True),
    ("float rounded", "SELECT avg(score) FROM t WHERE grp = 'b'",
     "SELECT round(avg(score), 2) FROM t WHERE grp = 'b'", False),
    ("int equals float", "SELECT count(*) FROM t", "SELECT count(*) * 1.0 FROM t", True),
    ("zero is not NULL", "SELECT score FROM t WHERE id = 5", "SELECT 0", False),
    ("NULL is NULL", "SELECT score FROM t WHERE id = 5", "SELECT NULL", True),
    # NULLs sort first ascending (SQLite; DuckDB is set to agree)
    ("NULL ordering, same query", "SELECT name FROM t ORDER BY score, id",
     "SELECT name FROM t ORDER BY score, id", True),
    ("NULL ordering changed", "SELECT name FROM t ORDER BY score, id",
     "SELECT name FROM t ORDER BY score NULLS LAST, id", False),
    ("NULL ordering, descending", "SELECT name FROM t ORDER BY score DESC, id",
     "SELECT name FROM t ORDER BY score DESC NULLS LAST, id", True),
    # integer division truncates (SQLite; DuckDB is set to agree)
    ("integer division, same query", "SELECT sum(v) / count(*) FROM n",
     "SELECT sum(v) / count(*) FROM n", True),
    ("integer division vs exact average", "SELECT sum(v) / count(*) FROM n",
     "SELECT avg(v) FROM n", False),
    ("integer division, literal", "SELECT sum(v) / count(*) FROM n", "SELECT 4", True),
    # a prediction is one statement
    ("extra statement", "SELECT name FROM t WHERE grp = 'a'",
     "SELECT name FROM t WHERE grp = 'a'; SELECT 1", False),
    ("extra harmful statement", "SELECT name FROM t WHERE grp = 'a'",
     "SELECT name FROM t WHERE grp = 'a'; DROP TABLE t", False),
    ("terminator and comment", "SELECT name FROM t WHERE grp = 'a'",
     "SELECT name FROM t WHERE grp = 'a'; -- done", True),
    # empty results: a match only with the same width
    # (issue 29: an empty gold is also checked on populated copies, tests/test_sql_witness.py)
    ("both empty, question not read", "SELECT name FROM t WHERE id > 100",
     "SELECT name FROM t WHERE 1 = 0", False),
    ("both empty, same filter", "SELECT name FROM t WHERE id > 100",
     "SELECT name FROM t WHERE 100 < id", True),
    ("both empty, other width", "SELECT name FROM t WHERE id > 100",
     "SELECT name, grp FROM t WHERE 1 = 0", False),
    ("gold empty, prediction not", "SELECT name FROM t WHERE id > 100",
     "SELECT name FROM t WHERE id = 1", False),
    ("prediction empty, gold not", "SELECT name FROM t WHERE id = 1",
     "SELECT name FROM t WHERE 1 = 0", False),
    ("gold rows plus more", "SELECT name FROM t WHERE grp = 'a'", "SELECT name FROM t", False),
]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return make_sqlite(tmp_path_factory.mktemp("reward") / "toy.sqlite", SCRIPT)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("why, gold, pred, expected", PERTURBATIONS,
                         ids=[p[0] for p in PERTURBATIONS])
def test_perturbations(toy, engine, why, gold, pred, expected):
    db = open_database(toy, cache_dir=CACHE, engine=engine)
    result = match(pred, gold, db)
    assert result.correct is expected, (why, result)
    assert execution_match(gold, gold, db), why  # the gold always matches itself


# Issue 21: hedges (several candidate answers in one solution) never pay.  Spider's convention
# compares results on one database, so a candidate that returns nothing there adds nothing.
HEDGES = [
    ("UNION of two candidate filters", "SELECT name FROM t WHERE grp = 'a'",
     "SELECT name FROM t WHERE grp = 'a' UNION SELECT name FROM t WHERE grp = 'b'"),
    ("UNION ALL of candidate counts", "SELECT count(*) FROM t",
     "SELECT count(*) FROM t UNION ALL SELECT count(*) FROM t WHERE grp = 'a'"),
    ("UNION of candidate literals", "SELECT count(*) FROM t", "SELECT 5 UNION SELECT 6"),
    ("every candidate value", "SELECT name FROM t ORDER BY score DESC LIMIT 1",
     "SELECT name FROM t"),
    ("candidates side by side", "SELECT count(*) FROM t", "SELECT count(*), 5, 7 FROM t"),
    ("candidate columns side by side", "SELECT name FROM t", "SELECT name, grp FROM t"),
    ("a second statement", "SELECT count(*) FROM t",
     "SELECT count(*) FROM t WHERE grp = 'a'; SELECT count(*) FROM t"),
    ("OR of candidate filters", "SELECT name FROM t WHERE grp = 'a'",
     "SELECT name FROM t WHERE grp = 'a' OR grp = 'b'"),
    ("IN list of candidates", "SELECT name FROM t WHERE id = 2",
     "SELECT name FROM t WHERE id IN (1, 2, 3)"),
    ("candidates in one string", "SELECT name FROM t WHERE id = 2",
     "SELECT group_concat(name) FROM t"),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("why, gold, pred", HEDGES, ids=[h[0] for h in HEDGES])
def test_hedges_never_match(toy, engine, why, gold, pred):
    db = open_database(toy, cache_dir=CACHE, engine=engine)
    assert not match(pred, gold, db).correct, why
    reward = SQLReward(engine=engine, cache_dir=CACHE)
    result = graded(reward, _task(toy, gold), [f"<solution>{pred}</solution>"])
    assert result.value <= 0.0 and not result.correct


def test_normalize_value_makes_types_agree():
    assert normalize_value(1) == normalize_value(1.0) == normalize_value(decimal.Decimal("1.00"))
    assert normalize_value(True) == 1 and normalize_value(None) is None
    assert normalize_value(0.1 + 0.2) == normalize_value(0.3)
    assert normalize_value(2.5) == 2.5 and normalize_value(2.5) != normalize_value(2.4)
    assert normalize_value(dt.datetime(2018, 3, 17, 7, 48, 9)) == "2018-03-17 07:48:09"
    assert normalize_value(dt.date(2018, 3, 17)) == "2018-03-17"
    assert normalize_value("7") == "7" and normalize_value("7") != normalize_value(7)


def test_float_tolerance_survives_a_rounding_boundary():
    a, b = 1.23456789051, 1.23456789049  # 10 digits: 1.234567891 and 1.23456789
    assert normalize_value(a) != normalize_value(b)
    assert multiset_equal([(normalize_value(a), "x")], [(normalize_value(b), "x")])
    assert not multiset_equal([(1.2345, "x")], [(1.2346, "x")])
    assert not multiset_equal([(normalize_value(a), "x")], [(normalize_value(b), "y")])


def test_column_mapping_is_exact_on_wide_results():
    rng = random.Random(0)
    n_rows, width = 12, 14
    gold = [tuple(rng.randrange(3) for _ in range(width)) for _ in range(n_rows)]
    cols = list(range(width))
    rng.shuffle(cols)
    pred = [tuple(row[c] for c in cols) for row in gold]
    rng.shuffle(pred)
    found = [m for m in column_mappings(gold, pred, width)
             if multiset_equal(gold, [tuple(r[i] for i in m) for r in pred])]
    assert found and all(sorted(m) == list(range(width)) for m in found)
    # permutations of one value set per column: every signature agrees, no mapping holds
    perms = [rng.sample(range(10), 10) for _ in range(width)]
    gold = [tuple(perms[c][r] for c in range(width)) for r in range(10)]
    other = [rng.sample(range(10), 10) for _ in range(width)]
    pred = [tuple(other[c][r] for c in range(width)) for r in range(10)]
    assert not any(multiset_equal(gold, [tuple(r[i] for i in m) for r in pred])
                   for m in column_mappings(gold, pred, width))


def test_many_identical_columns_do_not_blow_up(toy):
    db = open_database(toy)
    ones = ", ".join(["1"] * 40)
    gold = f"SELECT name, {ones} FROM t"
    assert execution_match(f"SELECT {ones}, name FROM t", gold, db)
    assert not execution_match(f"SELECT {ones}, grp FROM t", gold, db)
    swapped = ", ".join(["1"] * 39 + ["2"])
    assert not execution_match(f"SELECT name, {swapped} FROM t", gold, db)


def test_ties_structure_and_positional_order_by(toy):
    db = open_database(toy)
    info = gold_result("SELECT name, score FROM t WHERE score IS NOT NULL ORDER BY score", db)
    assert info.ordered and [r.taken for r in info.runs] == [1, 2, 2]
    assert execution_match("SELECT name, id FROM t ORDER BY 2 DESC",
                           "SELECT name, id FROM t ORDER BY id DESC", db)
    assert not execution_match("SELECT name, id FROM t ORDER BY 2",
                               "SELECT name, id FROM t ORDER BY 2 DESC", db)
    gold_alias = "SELECT grp, count(*) AS n FROM t GROUP BY grp ORDER BY n DESC LIMIT 1"
    for g in ("a", "b", "c"):  # every group has two rows
        assert execution_match(f"SELECT '{g}', 2", gold_alias, db)


@pytest.mark.parametrize("engine", ENGINES)
def test_spider_gold_with_ties_accepts_the_other_tied_answer(engine):
    db = spider_db("concert_singer", engine)
    gold = "SELECT YEAR FROM concert GROUP BY YEAR ORDER BY count(*) DESC LIMIT 1"
    with db.connection() as con:
        counts = dict(con.execute("SELECT Year, count(*) FROM concert GROUP BY Year").fetchall())
    tied = [y for y, n in counts.items() if n == max(counts.values())]
    assert len(tied) == 2  # 2014 and 2015 tie
    for year in tied:
        assert execution_match(f"SELECT '{year}'", gold, db)


def test_spider_null_order_and_integer_division_on_sqlite():
    world, concert = spider_db("world_1"), spider_db("concert_singer")
    gold = "SELECT Name FROM country ORDER BY LifeExpectancy LIMIT 3"  # NULLs first
    assert not execution_match("SELECT Name FROM country WHERE LifeExpectancy IS NOT NULL "
                               "ORDER BY LifeExpectancy LIMIT 3", gold, world)
    ratio = "SELECT sum(Capacity) / count(*) FROM stadium"
    assert not execution_match("SELECT avg(Capacity) FROM stadium", ratio, concert)
    assert execution_match("SELECT CAST(sum(Capacity) / count(*) AS INTEGER) FROM stadium",
                           ratio, concert)


def test_prediction_failures_are_misses(toy):
    db = open_database(toy)
    gold = "SELECT name FROM t"
    err = match("SELECT nope FROM t", gold, db)
    assert (err.correct, err.status) == (False, "error") and "nope" in err.error
    refused = match("DELETE FROM t", gold, db)
    assert (refused.correct, refused.status) == (False, "refused")
    slow = match("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
                 "SELECT count(*) FROM r", gold, db, timeout_s=0.3)
    assert (slow.correct, slow.status) == (False, "timeout")
    huge = match("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
                 "SELECT n FROM r", gold, db, timeout_s=5)
    assert (huge.correct, huge.status) == (False, "mismatch")  # stops one row past the gold


def test_a_broken_gold_raises(toy):
    with pytest.raises(GoldQueryError, match=r"the gold query failed on toy.sqlite \(SQLite\)"):
        gold_result("SELECT missing_column FROM t", open_database(toy))


@pytest.mark.parametrize("text, sql", [
    ("<think>x</think><solution>SELECT 1</solution>", "SELECT 1"),
    ("<solution>\n```sql\nSELECT 1\n```\n</solution>", "SELECT 1"),
    ("<solution></solution>", None),
    ("no tags", None),
    ("<solution>SELECT 1</solution><solution>SELECT 2</solution>", None),
    ("<solution>SELECT 1", None),
    ("<solution><sql>SELECT 1</sql></solution>", None),
])
def test_extract_solution(text, sql):
    assert extract_solution(text) == sql


def graded(reward: SQLReward, task: Task, actions: list[str]):
    """``reward`` of the final action, read by the SkyRL-SQL protocol as the env reads it."""
    return SQL_PROTOCOL.grade(reward, task, actions, Trajectory())


def _task(toy, gold="SELECT name FROM t WHERE grp = 'a'"):
    return Task("toy/0", "Who is in group a?", gold, {"db_path": str(toy)})


def test_reward_typed_outcome_and_components(toy):
    reward = SQLReward()
    task = _task(toy)
    good = graded(reward, task, ["<solution>SELECT name FROM t WHERE grp = 'a'</solution>"])
    assert good.value == 1.0 and good.components == {
        "format": 1.0, "has_answer": 1.0, "executed": 1.0, "correct": 1.0, "timeout": 0.0,
        "gold_error": 0.0}
    assert (good.correct, good.answered) == (True, True)
    wrong = graded(reward, task, ["<solution>SELECT name FROM t</solution>"])
    assert wrong.value == 0.0 and (wrong.correct, wrong.answered) == (False, True)
    assert wrong.components["executed"] == 1.0 and wrong.components["correct"] == 0.0
    broken = graded(reward, task, ["<solution>SELEC name</solution>"])
    assert broken.value == 0.0 and broken.components["executed"] == 0.0
    malformed = graded(reward, task, ["I think the answer is alice"])
    assert malformed.value == -1.0 and (malformed.correct, malformed.answered) == (False, False)
    hallucinated = graded(reward, task, ["<observation>x</observation><solution>SELECT name "
                                         "FROM t WHERE grp = 'a'</solution>"])
    assert hallucinated.components["format"] == 0.0  # a solution after its own observation
    gold_bad = graded(reward, _task(toy, "SELECT nope FROM t"), ["<solution>SELECT 1</solution>"])
    assert gold_bad.components["gold_error"] == 1.0 and gold_bad.value == 0.0
    assert gold_bad.correct is None and gold_bad.answered


def test_reward_runs_gold_and_prediction_on_its_engine(toy):
    # a double-quoted string: SQLite reads a string, DuckDB a (missing) column
    task = _task(toy, "SELECT name FROM t WHERE grp = 'a'")
    action = ['<solution>SELECT name FROM t WHERE grp = "a"</solution>']
    assert graded(SQLReward(), task, action).correct is True
    duck = graded(SQLReward(engine="duckdb", cache_dir=CACHE), task, action)
    assert duck.correct is False and duck.components["executed"] == 0.0
    with pytest.raises(ValueError, match="engine must be one of"):
        SQLReward(engine="mysql")


def test_reward_finds_the_database_by_id(toy):
    task = Task("toy/1", "q", "SELECT count(*) FROM t", {"db_id": "toy"})
    ok = graded(SQLReward(db_dir=toy.parent), task, ["<solution>SELECT 6</solution>"])
    assert ok.correct is True
    with pytest.raises(ValueError, match="names no database"):
        graded(SQLReward(), task, ["<solution>SELECT 6</solution>"])


def test_reward_timeout_component(toy):
    slow = graded(SQLReward(timeout_s=0.3), _task(toy), [
        "<solution>WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
        "SELECT count(*) FROM r</solution>"])
    assert slow.components["timeout"] == 1.0 and slow.value == 0.0


def test_sort_key_rewrite():
    r = with_sort_keys("SELECT a, count(*) AS n FROM t GROUP BY a ORDER BY n DESC, b LIMIT 3;")
    assert r.sql == ('SELECT a, count(*) AS n, (b) AS "__sort_key_0" FROM t GROUP BY a '
                     'ORDER BY n DESC, b')
    assert r.keys == (("column", 1), ("extra", 0)) and r.limit == 3
    assert r.key_indices(2) == (1, 2)
    assert with_sort_keys("SELECT a FROM t ORDER BY 3").key_indices(1) is None
    for declined in ("SELECT DISTINCT a FROM t ORDER BY a",
                     "SELECT a FROM t UNION SELECT a FROM u ORDER BY a",
                     "SELECT a FROM t ORDER BY a LIMIT 1 OFFSET 2",
                     "SELECT a FROM t", "SELECT 1 ORDER BY 1"):
        assert with_sort_keys(declined) is None, declined


def test_a_duckdb_file_is_queried_and_scored_with_duckdb(toy, tmp_path):
    from tir_envs.tools.sql.convert import duckdb_copy

    native = tmp_path / "toy.duckdb"
    native.write_bytes(duckdb_copy(toy, CACHE).read_bytes())
    duck = open_database(native)
    assert duck.engine == "duckdb" and duck.sqlite() is None
    gold = "SELECT name FROM t ORDER BY score DESC LIMIT 1"
    assert execution_match("SELECT 'carol'", gold, duck)
    assert execution_match("SELECT `name` FROM `t` WHERE grp = 'a'",
                           "SELECT name FROM t WHERE grp LIKE 'A'", duck)
    assert not execution_match("SELECT 'bob'", gold, duck)
    duck.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_harmful_solutions_score_0_and_leave_no_trace(tmp_path, engine):
    """Every harmful statement of the tool tests, given as the final solution, is a miss."""
    folder = tmp_path / "db"
    folder.mkdir()
    path = make_sqlite(folder / "pets_1.sqlite", "CREATE TABLE Pets (PetID INTEGER, PetType "
                       "TEXT, pet_age INTEGER, weight REAL); INSERT INTO Pets VALUES "
                       "(1, 'cat', 3, 12.0), (2, 'dog', 2, 13.4), (3, 'dog', 1, 9.3);")
    before, listing = sha256(path), folder_listing(folder)
    reward = SQLReward(engine=engine, cache_dir=tmp_path / "cache")
    task = Task("pets/0", "How many pets?", "SELECT count(*) FROM Pets", {"db_path": str(path)})
    for sql in dict.fromkeys(UNSAFE_SQLITE + UNSAFE_DUCKDB):
        result = graded(reward, task, [f"<solution>{sql}</solution>"])
        assert result.value == 0.0 and result.correct is False, (engine, sql)
    assert graded(reward, task, ["<solution>SELECT 3</solution>"]).correct is True
    assert sha256(path) == before and folder_listing(folder) == listing
    for leftover in ATTACK_FILES:
        assert not os.path.exists(leftover), leftover
