"""The shipped Spider dev data: counts, provenance note, the world_1 repair, and every gold query.

Every one of the 972 gold queries runs on its reference engine (SQLite) and, replayed as a
prediction through the policy's DuckDB path, matches itself — except 21 that lean on SQLite
turning text into numbers, each listed with the DuckDB query that reaches the same answer.
"""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from tests.sql_helpers import sha256, spider_db
from tir_envs.data.loaders import DatasetError
from tir_envs.data.spider import (SPIDER_DATABASES, SPIDER_QUESTIONS, load_spider,
                                  load_sql_file, spider_databases, spider_dir)
from tir_envs.rewards.sql import gold_result, match

# Gold queries DuckDB will not run verbatim (strict types: a TEXT column compared with a
# number, or averaged).  Value: a DuckDB query spelling out SQLite's implicit conversion.
STRICT_TYPE_REWRITES = {
    "car_1/30": "SELECT AVG(COALESCE(TRY_CAST(mpg AS DOUBLE), 0)) FROM cars_data WHERE Cylinders = 4",
    "car_1/38": "SELECT COUNT(*) FROM cars_data WHERE horsepower > '150'",
    "car_1/48": "SELECT AVG(COALESCE(TRY_CAST(horsepower AS DOUBLE), 0)) FROM cars_data "
                "WHERE year < 1980",
    "concert_singer/24": "SELECT t2.name, t2.capacity FROM concert AS t1 JOIN stadium AS t2 "
                         "ON t1.stadium_id = t2.stadium_id WHERE t1.year >= '2014' "
                         "GROUP BY t2.name, t2.capacity ORDER BY COUNT(*) DESC LIMIT 1",
    "concert_singer/25": "SELECT t2.name, t2.capacity FROM concert AS t1 JOIN stadium AS t2 "
                         "ON t1.stadium_id = t2.stadium_id WHERE t1.year > '2013' "
                         "GROUP BY t2.name, t2.capacity ORDER BY COUNT(*) DESC LIMIT 1",
    "dog_kennels/2": "SELECT AVG(CAST(age AS DOUBLE)) FROM Dogs "
                     "WHERE dog_id IN (SELECT dog_id FROM Treatments)",
    "dog_kennels/56": "SELECT COUNT(*) FROM Dogs WHERE age < "
                      "(SELECT CAST(AVG(CAST(age AS DOUBLE)) AS VARCHAR) FROM Dogs)",
    "dog_kennels/68": "SELECT AVG(CAST(age AS DOUBLE)) FROM Dogs",
    "museum_visit/5": "SELECT AVG(num_of_staff) FROM museum WHERE open_year < '2009'",
    "museum_visit/7": "SELECT name FROM museum WHERE num_of_staff > "
                      "(SELECT MIN(num_of_staff) FROM museum WHERE open_year > '2010')",
    "museum_visit/15": "SELECT t1.name FROM visitor AS t1 JOIN visit AS t2 ON t1.id = "
                       "t2.visitor_id JOIN museum AS t3 ON t3.Museum_ID = t2.Museum_ID "
                       "WHERE t3.open_year < '2009' INTERSECT SELECT t1.name FROM visitor AS "
                       "t1 JOIN visit AS t2 ON t1.id = t2.visitor_id JOIN museum AS t3 ON "
                       "t3.Museum_ID = t2.Museum_ID WHERE t3.open_year > '2011'",
    "museum_visit/16": "SELECT COUNT(*) FROM visitor WHERE NOT id IN (SELECT t2.visitor_id "
                       "FROM museum AS t1 JOIN visit AS t2 ON t1.Museum_ID = t2.Museum_ID "
                       "WHERE t1.open_year > '2010')",
    "museum_visit/17": "SELECT COUNT(*) FROM museum WHERE open_year > '2013' OR open_year < '2008'",
    "student_transcripts_tracking/56": "SELECT AVG(CAST(substr(transcript_date, 1, 4) AS DOUBLE)) "
                                       "FROM Transcripts",
}
# the same gold SQL asked twice (Spider pairs paraphrased questions)
for _first, _second in [("car_1/30", "car_1/31"), ("car_1/38", "car_1/39"),
                        ("car_1/48", "car_1/49"), ("dog_kennels/2", "dog_kennels/3"),
                        ("dog_kennels/56", "dog_kennels/57"), ("dog_kennels/68", "dog_kennels/69"),
                        ("student_transcripts_tracking/56", "student_transcripts_tracking/57")]:
    STRICT_TYPE_REWRITES[_second] = STRICT_TYPE_REWRITES[_first]

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
    # the repair turned 47 'NULL' strings into NULLs; the real years are untouched
    assert con.execute("SELECT count(*) FROM country WHERE IndepYear IS NULL").fetchone()[0] == 47
    assert con.execute("SELECT IndepYear FROM country WHERE Code = 'AFG'").fetchone()[0] == 1919
    con.close()


def test_load_subset_and_unknown_database():
    pets = load_spider(["pets_1"])
    assert pets and all(t.meta["db_id"] == "pets_1" for t in pets)
    assert len(load_spider(limit=5)) == 5
    with pytest.raises(ValueError, match="unknown Spider database.*'nope'"):
        load_spider(["nope"])


def test_load_sql_file_spider_layout_and_errors(tmp_path):
    db_dir = tmp_path / "dbs"
    (db_dir / "pets_1").mkdir(parents=True)
    (db_dir / "pets_1" / "pets_1.sqlite").write_bytes(spider_databases()["pets_1"].read_bytes())
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"question": "How many pets?", "query": "SELECT count(*) FROM Pets",
                                "db_id": "pets_1"}) + "\n")
    tasks = load_sql_file(good, db_dir=db_dir)
    assert tasks[0].answer == "SELECT count(*) FROM Pets"
    assert tasks[0].meta["db_path"] == str(db_dir / "pets_1" / "pets_1.sqlite")

    no_gold = tmp_path / "no_gold.jsonl"
    no_gold.write_text(json.dumps({"question": "q", "db_id": "pets_1"}) + "\n")
    with pytest.raises(DatasetError, match=r"no_gold.jsonl:record 1: no gold SQL"):
        load_sql_file(no_gold, db_dir=db_dir)
    missing = tmp_path / "missing.jsonl"
    missing.write_text(json.dumps({"question": "q", "query": "SELECT 1", "db_id": "zoo"}) + "\n")
    with pytest.raises(DatasetError, match=r"missing.jsonl:record 1: database not found"):
        load_sql_file(missing, db_dir=db_dir)
    with pytest.raises(DatasetError, match=r"no database; give 'db_path'"):
        load_sql_file(missing)


def test_every_gold_query_runs_on_the_reference_engine():
    nonempty = 0
    for t in TASKS:
        gold = gold_result(t.answer, spider_db(t.meta["db_id"]))
        nonempty += bool(gold.rows)
    assert nonempty >= 950  # the shared data notes 953 non-empty results before the repair


def test_every_gold_query_matches_itself_through_the_duckdb_path():
    failures = []
    for t in TASKS:
        result = match(t.answer, t.answer, spider_db(t.meta["db_id"]))
        if t.id in STRICT_TYPE_REWRITES:
            assert result.status == "error" and "Binder Error" in result.error, t.id
            rewrite = match(STRICT_TYPE_REWRITES[t.id], t.answer, spider_db(t.meta["db_id"]))
            if not rewrite.correct:
                failures.append((t.id, "rewrite", rewrite.status, rewrite.error))
        elif not result.correct:
            failures.append((t.id, t.answer, result.status, result.error))
    assert not failures, failures
    assert len(STRICT_TYPE_REWRITES) == 21
