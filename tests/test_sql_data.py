"""The shipped Spider dev data (counts, provenance, the world_1 repair, the oracle over every
gold query) and the loaders for your own Spider/BIRD/SynSQL/SkyRL-SQL records."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections import Counter

import pytest

from tests.sql_helpers import sha256, spider_db
from tir_envs.data.loaders import DatasetError
from tir_envs.data.spider import (SPIDER_DATABASES, SPIDER_QUESTIONS, load_spider,
                                  load_sql_file, spider_databases, spider_dir)
from tir_envs.data.sql_records import load_sql_records, record_style
from tests.sql_helpers import SQL_PROTOCOL
from tir_envs.rewards.sql import GoldQueryError, SQLReward, match
from tir_envs.trajectory import Trajectory

TASKS = load_spider()


def test_counts_and_fields():
    assert len(TASKS) == SPIDER_QUESTIONS == 972
    dbs = spider_databases()
    assert len(dbs) == SPIDER_DATABASES == 19
    assert len({t.id for t in TASKS}) == 972
    assert {t.meta["db_id"] for t in TASKS} == set(dbs)
    for t in TASKS:
        assert t.question.strip() and t.answer.strip()
        assert t.meta["db_path"] == str(dbs[t.meta["db_id"]])


def test_the_gold_is_spiders_original_sql():
    first = TASKS[0]
    assert first.answer == "SELECT count(*) FROM ship WHERE disposition_of_ship  =  'Captured'"
    assert "`" in first.meta["spiderman_query"]  # the cleaned MySQL-style text, kept aside
    assert not any("`" in t.answer for t in TASKS)
    # the dialect DuckDB refuses and SQLite reads: double-quoted strings
    assert sum('"' in t.answer for t in TASKS) > 200


def test_sources_note_names_license_counts_and_hashes():
    text = (spider_dir() / "SOURCES.md").read_text()
    assert "CC BY-SA 4.0" in text and "972" in text and "19" in text
    assert sha256(spider_dir() / "questions.jsonl") in text
    assert sha256(spider_dir() / "world_1.sqlite") in text  # the hash after the repair


def test_world_1_numeric_columns_hold_no_text():
    con = sqlite3.connect(spider_databases()["world_1"])
    for col in ("IndepYear", "LifeExpectancy", "GNPOld", "Capital", "Population", "GNP"):
        n = con.execute(f"SELECT count(*) FROM country WHERE typeof({col}) = 'text'").fetchone()[0]
        assert n == 0, col
    assert con.execute("SELECT count(*) FROM country WHERE IndepYear IS NULL").fetchone()[0] == 47
    assert con.execute("SELECT IndepYear FROM country WHERE Code = 'AFG'").fetchone()[0] == 1919
    con.close()


def test_oracle_every_gold_scores_1_against_itself_on_the_default_engine():
    reward, failures, nonempty = SQLReward(), [], 0
    for t in TASKS:
        result = SQL_PROTOCOL.grade(reward, t, [f"<solution>{t.answer}</solution>"], Trajectory())
        if result.value != 1.0 or result.correct is not True:
            failures.append((t.id, result.components))
        with spider_db(t.meta["db_id"]).connection() as con:
            nonempty += bool(con.execute(t.answer).fetchmany(1))
    assert not failures, failures
    assert nonempty >= 950  # the few empty golds match only an empty result of equal width


def test_on_duckdb_every_gold_that_runs_matches_itself():
    """The explicit DuckDB choice: gold and prediction on one engine never disagree; what
    DuckDB cannot run (SQLite dialect) is a gold error, never a wrong verdict."""
    outcomes = Counter()
    for t in TASKS:
        db = spider_db(t.meta["db_id"], "duckdb")
        try:
            result = match(t.answer, t.answer, db)
        except GoldQueryError:
            outcomes["gold_error"] += 1
            continue
        outcomes[result.status] += 1
    assert set(outcomes) <= {"match", "gold_error"} and outcomes["match"] > 600, outcomes


def test_load_subset_and_unknown_database():
    pets = load_spider(["pets_1"])
    assert pets and all(t.meta["db_id"] == "pets_1" for t in pets)
    assert len(load_spider(limit=5)) == 5
    with pytest.raises(ValueError, match="unknown Spider database.*'nope'"):
        load_spider(["nope"])


@pytest.fixture
def db_dir(tmp_path):
    root = tmp_path / "dbs"
    (root / "pets_1").mkdir(parents=True)
    shutil.copyfile(spider_databases()["pets_1"], root / "pets_1" / "pets_1.sqlite")
    syn = root / "SynSQL-2.5M" / "databases" / "singer"
    syn.mkdir(parents=True)
    shutil.copyfile(spider_databases()["singer"], syn / "singer.sqlite")
    return root


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _skyrl_prompt(question):
    user = ("Task Overview:\nYou are a data science expert.\n\nDatabase Engine:\nSQLite\n\n"
            f"Database Schema:\nCREATE TABLE singer (...)\n\nQuestion:\n{question}\n\n"
            "Instructions:\n- Make sure you only output the information that is asked.")
    return [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": user}]


def test_loader_reads_every_record_style(tmp_path, db_dir):
    source = _write(tmp_path / "mixed.jsonl", [
        {"question": "How many pets?", "query": "SELECT count(*) FROM Pets", "db_id": "pets_1"},
        {"question_id": 7, "db_id": "pets_1", "question": "Heaviest pet?",
         "evidence": "heaviest refers to MAX(weight)",
         "SQL": "SELECT PetID FROM Pets ORDER BY weight DESC LIMIT 1", "difficulty": "simple"},
        {"db_id": "singer", "question": "How many singers?", "external_knowledge": "",
         "sql": "SELECT count(*) FROM singer", "sql_complexity": "Simple"},
        {"db_id": "singer", "data": "synsql", "env_class": "text2sql",
         "prompt": _skyrl_prompt("How many singers are there?"),
         "reward_spec": {"method": "rule", "ground_truth": "SELECT count(*) FROM singer"}},
    ])
    tasks = load_sql_file(source, db_dir=db_dir)
    assert [t.meta["style"] for t in tasks] == ["spider", "bird", "synsql", "skyrl"]
    assert tasks[0].meta["db_path"] == str(db_dir / "pets_1" / "pets_1.sqlite")
    assert tasks[1].id == "7" and tasks[1].answer.startswith("SELECT PetID")
    assert tasks[1].question == "Heaviest pet?\nEvidence: heaviest refers to MAX(weight)"
    assert tasks[1].meta["evidence"] == "heaviest refers to MAX(weight)"
    assert tasks[2].question == "How many singers?" and "evidence" not in tasks[2].meta
    assert tasks[3].question == "How many singers are there?"
    assert tasks[3].meta["db_path"].endswith("SynSQL-2.5M/databases/singer/singer.sqlite")
    reward = SQLReward()
    for t in tasks:  # each gold runs on its database (SQLite) and matches itself
        assert SQL_PROTOCOL.grade(reward, t, [f"<solution>{t.answer}</solution>"], Trajectory()).correct is True
    assert record_style({"reward_spec": {}, "prompt": []}) == "skyrl"


def test_loader_errors_name_file_record_and_fix(tmp_path, db_dir):
    def load(records, **kw):
        return load_sql_records(_write(tmp_path / "bad.jsonl", records), **kw)

    with pytest.raises(DatasetError, match=r"bad.jsonl:record 1: no gold SQL.*'SQL' string"):
        load([{"db_id": "pets_1", "question": "q", "evidence": "", "SQL": ""}], db_dir=db_dir)
    with pytest.raises(DatasetError, match=r"record 1: no gold SQL.*'query'"):
        load([{"question": "q", "db_id": "pets_1"}], db_dir=db_dir)
    with pytest.raises(DatasetError, match=r"record 2: no database for db_id 'zoo'"):
        load([{"question": "q", "query": "SELECT 1", "db_id": "pets_1"},
              {"question": "q", "query": "SELECT 1", "db_id": "zoo"}], db_dir=db_dir)
    with pytest.raises(DatasetError, match=r"pass db_dir="):
        load([{"question": "q", "query": "SELECT 1", "db_id": "pets_1"}])
    with pytest.raises(DatasetError, match=r"no 'Question:'"):
        load([{"db_id": "singer", "data": "synsql", "prompt": [{"role": "user", "content": "x"}],
               "reward_spec": {"ground_truth": "SELECT 1"}}], db_dir=db_dir)
    with pytest.raises(DatasetError, match=r"no question text"):
        load([{"query": "SELECT 1", "db_id": "pets_1"}], db_dir=db_dir)


def test_skyrl_parquet_rows_load(tmp_path, db_dir):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"data": "synsql", "db_id": "singer", "env_class": "text2sql",
             "prompt": _skyrl_prompt("How many singers are there?"),
             "reward_spec": {"method": "rule", "ground_truth": "SELECT count(*) FROM singer"}}]
    path = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    (task,) = load_sql_file(path, db_dir=db_dir)
    assert task.question == "How many singers are there?"
    assert task.answer == "SELECT count(*) FROM singer" and task.meta["data"] == "synsql"
