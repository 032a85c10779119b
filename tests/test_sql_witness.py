"""Issue 29, item 4 for SQL: an empty gold result no longer pays a query that returns nothing
without reading the question.  Real SQLite: the 21 shipped Spider golds that are empty on
their database, and a toy database."""

from __future__ import annotations

import functools

import pytest

from tests.sql_helpers import SQL_PROTOCOL, make_sqlite, sha256
from tir_envs.data.spider import load_spider
from tir_envs.task import Task
from tir_envs.rewards.sql import SQLReward, gold_result, match, task_database
from tir_envs.rewards.sql_witness import witnesses
from tir_envs.trajectory import Trajectory


@functools.lru_cache(maxsize=1)
def _empty_golds() -> list[Task]:
    return [t for t in load_spider() if not gold_result(t.answer, task_database(t)).rows]


def _nothing_like(gold: str) -> list[str]:
    """Queries of the gold's width that return nothing whatever the data: no question read."""
    return [f"SELECT * FROM ({gold}) AS s WHERE 0",
            f"SELECT * FROM ({gold}) AS s LIMIT 0",
            f"SELECT * FROM ({gold}) AS s WHERE (SELECT count(*) FROM sqlite_master) < 0"]


def _solve(task: Task, sql: str):
    return SQL_PROTOCOL.grade(SQLReward(), task, [f"<solution>{sql}</solution>"], Trajectory())


def test_the_shipped_empty_golds_are_the_21_and_each_is_witnessed():
    tasks = _empty_golds()
    assert len(tasks) == 21
    for task in tasks:
        result = _solve(task, task.answer)
        assert result.correct is True and result.value == 1.0, task.id
        assert match(task.answer, task.answer, task_database(task)).details["witness"]


@pytest.mark.parametrize("shape", [0, 1, 2])
def test_a_query_returning_nothing_without_reading_the_question_scores_0(shape):
    paid = []
    for task in _empty_golds():
        sql = _nothing_like(task.answer)[shape]
        assert not gold_result(sql, task_database(task)).rows  # empty on the real database
        result = _solve(task, sql)
        if result.correct or result.value > 0:
            paid.append(task.id)
    assert paid == []


def test_a_near_miss_filter_scores_0_and_an_equivalent_one_pays(tmp_path):
    db = make_sqlite(tmp_path / "toy.sqlite", """
        CREATE TABLE stadium (id INTEGER PRIMARY KEY, name TEXT, capacity INTEGER);
        INSERT INTO stadium VALUES (1, 'A', 1000), (2, 'B', 52000), (3, 'C', 30000);""")
    task = Task("toy/0", "Stadiums with a capacity between 5000 and 10000?",
                "SELECT name FROM stadium WHERE capacity BETWEEN 5000 AND 10000",
                {"db_path": str(db)})
    assert _solve(task, "SELECT name FROM stadium WHERE capacity >= 5000 AND "
                        "capacity <= 10000").correct is True
    assert _solve(task, "SELECT name FROM stadium WHERE capacity > 5000 AND "
                        "capacity < 10000").correct is False  # the ends differ
    assert _solve(task, "SELECT name FROM stadium WHERE capacity = 7").correct is False
    assert _solve(task, "SELECT name FROM stadium WHERE name = 'Z'").correct is False


def test_a_gold_no_copy_can_give_a_row_is_ungradable_never_paid(tmp_path):
    db = make_sqlite(tmp_path / "toy.sqlite", "CREATE TABLE t (id INTEGER, name TEXT);"
                                              "INSERT INTO t VALUES (1, 'a');")
    task = Task("toy/1", "Nothing, ever.", "SELECT name FROM t WHERE 1 = 0", {"db_path": str(db)})
    result = _solve(task, "SELECT name FROM t WHERE 0")
    assert result.correct is None and result.value == 0.0
    assert result.components["unwitnessed"] == 1.0 and result.answered and result.infra_failed


def test_witness_copies_leave_the_database_untouched_and_refuse_writes(tmp_path):
    task = _empty_golds()[0]
    path = task_database(task)
    before = sha256(path)
    found = witnesses(path, task.answer)
    assert found is not None and sha256(path) == before
    assert found.check("DELETE FROM stadium", task.answer, 5.0) is False
    assert found.check(task.answer, task.answer, 5.0) is True  # still populated


# ------------------------------------------------ issue 43: every spelling of a gold is witnessed
@functools.lru_cache(maxsize=None)
def _names(db: str) -> frozenset[str]:
    from tests.sql_helpers import schema_names
    return frozenset(schema_names(db))


@pytest.mark.parametrize("style", ["backtick", "double", "bracket"])
def test_every_spider_gold_matches_itself_in_every_quoting_style(style):
    """Every Spider gold with its names quoted as SkyRL/OmniSQL data quotes them (backticks),
    or in double quotes or brackets, matches itself and the original spelling; the empty ones
    are witnessed (student_transcripts_tracking/47, world_1/84, 106 and 107 were
    ``unwitnessed`` with backticks: reward 0, episode masked)."""
    from tests.sql_helpers import quote_identifiers

    empty = {t.id for t in _empty_golds()}
    failed = []
    for task in load_spider():
        db = task_database(task)
        quoted = quote_identifiers(task.answer, _names(db), style)
        assert quoted != task.answer, task.id
        pairs = [(quoted, quoted)] + ([(quoted, task.answer), (task.answer, quoted)]
                                      if task.id in empty else [])
        for pred, gold in pairs:
            verdict = match(pred, gold, db)
            if verdict.status != "match" or \
                    (task.id in empty and not verdict.details.get("witness")):
                failed.append((task.id, verdict.status))
    assert failed == []


def test_a_gold_in_mixed_quoting_is_witnessed():
    """Property: any quoting of each name (bare, backticks, double quotes, brackets, mixed
    within one query) of an empty gold is the same gold: it matches itself, witnessed."""
    from hypothesis import given, settings, strategies as st

    from tests.sql_helpers import quote_identifiers

    golds = _empty_golds()

    @settings(max_examples=30, deadline=None, derandomize=True)
    @given(st.sampled_from(golds), st.lists(st.sampled_from([None, "backtick", "double",
                                                              "bracket"]), min_size=12,
                                            max_size=12))
    def check(task, styles):
        db = task_database(task)
        quoted = quote_identifiers(task.answer, _names(db),
                                   lambda i: styles[i % len(styles)])
        verdict = match(quoted, quoted, db)
        assert verdict.status == "match" and verdict.details["witness"], (task.id, quoted)
        assert match(task.answer, quoted, db).status == "match", (task.id, quoted)

    check()
