"""Execution match and the SQL reward: multisets, order, ties, normalisation, misses, format."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from tests.sql_helpers import CACHE, make_sqlite, spider_db
from tir_envs.data.task import Task
from tir_envs.rewards import sql as sql_reward
from tir_envs.rewards.sql import (GoldQueryError, SQLReward, execution_match, extract_solution,
                                  gold_result, match, normalize_value)
from tir_envs.tools.sql.database import open_database
from tir_envs.tools.sql.ordering import with_sort_keys
from tir_envs.trajectory import Trajectory

SCRIPT = """
CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, score REAL, grp TEXT);
INSERT INTO t VALUES (1, 'alice', 9.5, 'a'), (2, 'bob', 7.0, 'b'), (3, 'carol', 9.5, 'a'),
                     (4, 'dave', 3.25, 'b'), (5, 'erin', NULL, 'c'), (6, 'Alan', 7.0, 'c');
"""


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = make_sqlite(tmp_path_factory.mktemp("reward") / "toy.sqlite", SCRIPT)
    return open_database(path, cache_dir=CACHE)


def test_normalize_value_makes_engines_agree():
    assert normalize_value(1) == normalize_value(1.0) == normalize_value(decimal.Decimal("1.00"))
    assert normalize_value(True) == 1 and normalize_value(None) is None
    assert normalize_value(0.1 + 0.2) == normalize_value(0.3)
    assert normalize_value(2.5) == 2.5 and normalize_value(2.5) != normalize_value(2.4)
    assert normalize_value(dt.datetime(2018, 3, 17, 7, 48, 9)) == "2018-03-17 07:48:09"
    assert normalize_value(dt.date(2018, 3, 17)) == "2018-03-17"
    assert normalize_value("7") == "7" and normalize_value("7") != normalize_value(7)


@pytest.mark.parametrize("pred", [
    "SELECT name FROM t WHERE grp = 'a'",
    "SELECT name FROM t WHERE grp = 'a' ORDER BY id DESC",       # gold unordered: any order
    "SELECT `name` FROM `t` WHERE `grp` = 'a'",                  # MySQL backticks
    "select name from t where grp in ('a') ;",
])
def test_same_result_matches(db, pred):
    assert execution_match(pred, "SELECT name FROM t WHERE grp = 'a'", db)


@pytest.mark.parametrize("pred, gold, why", [
    ("SELECT name FROM t ORDER BY id DESC", "SELECT name FROM t ORDER BY id", "wrong order"),
    ("SELECT grp FROM t", "SELECT DISTINCT grp FROM t", "duplicate rows"),
    ("SELECT DISTINCT grp FROM t", "SELECT grp FROM t", "missing duplicates"),
    ("SELECT name, grp FROM t", "SELECT name FROM t", "extra column"),
    ("SELECT grp, name FROM t", "SELECT name, grp FROM t", "columns swapped"),
    ("SELECT name FROM t WHERE id < 6", "SELECT name FROM t", "missing row"),
    ("SELECT score FROM t WHERE id = 4", "SELECT 3.5", "different value"),
    ("SELECT 0", "SELECT score FROM t WHERE id = 5", "zero is not NULL"),
])
def test_hand_made_negatives_do_not_match(db, pred, gold, why):
    result = match(pred, gold, db)
    assert not result.correct and result.status == "mismatch", why


def test_ints_floats_and_nulls_normalise(db):
    assert execution_match("SELECT count(*) * 1.0 FROM t", "SELECT count(*) FROM t", db)
    assert execution_match("SELECT NULL", "SELECT score FROM t WHERE id = 5", db)
    assert execution_match("SELECT avg(score) FROM t", "SELECT sum(score) / count(score) FROM t", db)


def test_ties_under_limit_accept_any_tied_row(db):
    gold = "SELECT name FROM t ORDER BY score DESC LIMIT 1"   # alice and carol tie at 9.5
    assert execution_match("SELECT 'carol'", gold, db)
    assert execution_match("SELECT 'alice'", gold, db)
    assert not execution_match("SELECT 'bob'", gold, db)
    assert not execution_match("SELECT name FROM t WHERE score > 9", gold, db)  # two rows
    gold_alias = "SELECT grp, count(*) AS n FROM t GROUP BY grp ORDER BY n DESC LIMIT 1"
    for g in ("a", "b", "c"):  # every group has two rows
        assert execution_match(f"SELECT '{g}', 2", gold_alias, db)


def test_ties_in_a_full_ordering_may_be_permuted_but_runs_may_not(db):
    gold = "SELECT name, score FROM t WHERE score IS NOT NULL ORDER BY score"
    assert execution_match("SELECT name, score FROM t WHERE score IS NOT NULL "
                           "ORDER BY score, name DESC", gold, db)
    assert not execution_match("SELECT name, score FROM t WHERE score IS NOT NULL "
                               "ORDER BY score DESC", gold, db)
    info = gold_result(gold, db)
    assert info.ordered and [r.taken for r in info.runs] == [1, 2, 2]


def test_positional_order_by_and_subquery_order(db):
    assert execution_match("SELECT name, id FROM t ORDER BY 2 DESC",
                           "SELECT name, id FROM t ORDER BY id DESC", db)
    assert not execution_match("SELECT name, id FROM t ORDER BY 2",
                               "SELECT name, id FROM t ORDER BY 2 DESC", db)
    inner_only = "SELECT name FROM (SELECT name FROM t ORDER BY id) AS s"
    assert not gold_result(inner_only, db).ordered


def test_like_is_case_insensitive_as_in_sqlite(db):
    gold = "SELECT name FROM t WHERE name LIKE 'al%'"  # SQLite: alice and Alan
    assert len(gold_result(gold, db).rows) == 2
    assert execution_match(gold, gold, db)


def test_prediction_failures_are_misses(db, monkeypatch):
    gold = "SELECT name FROM t"
    err = match("SELECT nope FROM t", gold, db)
    assert (err.correct, err.status) == (False, "error") and "nope" in err.error
    refused = match("DELETE FROM t", gold, db)
    assert (refused.correct, refused.status) == (False, "refused")
    slow = match("SELECT count(*) FROM range(1000000000) a, range(1000) b", gold, db,
                 timeout_s=0.3)
    assert (slow.correct, slow.status) == (False, "timeout")
    monkeypatch.setattr(sql_reward, "MAX_RESULT_ROWS", 3)
    big = match("SELECT name FROM t", "SELECT name FROM t", db)
    assert (big.correct, big.status) == (False, "too_many_rows")


def test_a_broken_gold_raises(db):
    with pytest.raises(GoldQueryError, match="the gold query failed on toy.sqlite"):
        gold_result("SELECT missing_column FROM t", db)


def test_spider_gold_with_ties_accepts_the_other_tied_answer():
    db = spider_db("concert_singer")
    gold = ("SELECT `YEAR` FROM `concert` GROUP BY `YEAR` ORDER BY COUNT(*) DESC LIMIT 1")
    counts = dict(open_database(db.path, cache_dir=CACHE).connect().execute(
        "SELECT Year, count(*) FROM concert GROUP BY Year").fetchall())
    top = max(counts.values())
    tied = [y for y, n in counts.items() if n == top]
    assert len(tied) == 2  # 2014 and 2015 tie
    for year in tied:
        assert execution_match(f"SELECT '{year}'", gold, db)


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


def _task(db, gold="SELECT name FROM t WHERE grp = 'a'"):
    return Task("toy/0", "Who is in group a?", gold, {"db_path": str(db.path)})


def test_reward_components_tell_format_from_wrong(db):
    reward = SQLReward()
    task, traj = _task(db), Trajectory()
    good = reward(task, traj, ["<solution>SELECT name FROM t WHERE grp = 'a'</solution>"], db)
    assert good.value == 1.0 and good.components == {
        "format": 1.0, "has_answer": 1.0, "executed": 1.0, "correct": 1.0, "timeout": 0.0,
        "gold_error": 0.0}
    wrong = reward(task, traj, ["<solution>SELECT name FROM t</solution>"], db)
    assert wrong.value == 0.0 and wrong.components["format"] == 1.0
    assert wrong.components["executed"] == 1.0 and wrong.components["correct"] == 0.0
    broken = reward(task, traj, ["<solution>SELEC name</solution>"], db)
    assert broken.value == 0.0 and broken.components["executed"] == 0.0
    malformed = reward(task, traj, ["I think the answer is alice"], db)
    assert malformed.value == -1.0 and malformed.components["format"] == 0.0
    hallucinated = reward(task, traj, ["<observation>x</observation><solution>SELECT name FROM t "
                                       "WHERE grp = 'a'</solution>"], db)
    assert hallucinated.components["format"] == 0.0  # a solution after its own observation
    gold_bad = reward(_task(db, "SELECT nope FROM t"), traj, ["<solution>SELECT 1</solution>"], db)
    assert gold_bad.components["gold_error"] == 1.0 and gold_bad.value == 0.0


def test_reward_timeout_component(db):
    reward = SQLReward(timeout_s=0.3)
    slow = reward(_task(db), Trajectory(), [
        "<solution>SELECT count(*) FROM range(1000000000) a, range(1000) b</solution>"], db)
    assert slow.components["timeout"] == 1.0 and slow.value == 0.0


def test_reward_needs_a_database_path():
    with pytest.raises(ValueError, match=r"meta\['db_path'\]"):
        SQLReward()(Task("x", "q", "SELECT 1"), Trajectory(), ["<solution>SELECT 1</solution>"])


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


def test_a_duckdb_file_is_its_own_reference(db, tmp_path):
    from tir_envs.tools.sql.convert import duckdb_copy

    native = tmp_path / "toy.duckdb"
    native.write_bytes(duckdb_copy(db.path, CACHE).read_bytes())
    duck = open_database(native)
    assert duck.sqlite_path is None and duck.sqlite() is None
    gold = "SELECT name FROM t ORDER BY score DESC LIMIT 1"
    assert execution_match("SELECT 'carol'", gold, duck)
    assert execution_match("SELECT `name` FROM `t` WHERE grp = 'a'",
                           "SELECT name FROM t WHERE grp LIKE 'A'", duck)
    assert not execution_match("SELECT 'bob'", gold, duck)
    duck.close()
