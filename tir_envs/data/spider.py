"""Spider dev, shipped with the package: 19 SQLite databases and their 972 questions.

See ``tir_envs/data/spider/SOURCES.md`` for origin, license, the one repair made, and counts.
Tasks carry Spider's original gold SQL (``dev.json``, written for SQLite and run on SQLite by
default, verbatim) in ``answer`` and the database path in ``meta['db_path']``; every load
checks the number of questions and databases so a damaged install fails loudly.
Your own text-to-SQL data (Spider, BIRD, SynSQL or SkyRL-SQL records) loads with
``load_sql_file`` (``tir_envs.data.sql_records``).
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path
from typing import Any

from tir_envs.data.loaders import expect_count, iter_jsonl
from tir_envs.data.sql_records import load_sql_records
from tir_envs.task import Task

SPIDER_QUESTIONS = 972
SPIDER_DATABASES = 19
_REQUIRED = ("id", "db_id", "question", "query", "db_path")


def spider_dir() -> Path:
    """Folder of the shipped Spider dev databases and ``questions.jsonl``."""
    return Path(str(resources.files("tir_envs") / "data" / "spider"))


def spider_databases() -> dict[str, Path]:
    """``{db_id: path}`` of the shipped SQLite databases."""
    found = {p.stem: p for p in sorted(spider_dir().glob("*.sqlite"))}
    expect_count(list(found), SPIDER_DATABASES, "Spider dev databases")
    return found


@functools.lru_cache(maxsize=1)
def _records() -> tuple[dict[str, Any], ...]:
    records = tuple(iter_jsonl(spider_dir() / "questions.jsonl", _REQUIRED))
    expect_count(records, SPIDER_QUESTIONS, "Spider dev questions.jsonl")
    return records


def load_spider(db_ids: list[str] | None = None, limit: int | None = None) -> list[Task]:
    """The shipped Spider dev questions as tasks, optionally only some databases."""
    databases = spider_databases()
    if db_ids is not None:
        unknown = sorted(set(db_ids) - set(databases))
        if unknown:
            raise ValueError(f"unknown Spider database(s) {unknown}; shipped: "
                             f"{', '.join(sorted(databases))}")
    tasks = []
    for record in _records():
        if db_ids is not None and record["db_id"] not in db_ids:
            continue
        tasks.append(_task(record, databases[record["db_id"]]))
    return tasks[:limit]


def _task(record: dict[str, Any], db_path: Path) -> Task:
    meta = {"db_id": record["db_id"], "db_path": str(db_path), "dataset": "spider_dev"}
    if "spiderman_query" in record:
        meta["spiderman_query"] = record["spiderman_query"]
    return Task(id=str(record["id"]), question=record["question"], answer=record["query"],
                meta=meta)


def load_sql_file(source: str | Path, db_dir: str | Path | None = None,
                  limit: int | None = None) -> list[Task]:
    """Text-to-SQL tasks from your own ``.jsonl``/``.parquet`` file: Spider-, BIRD-, SynSQL- or
    SkyRL-SQL-style records, databases found in ``db_dir`` (see ``data.sql_records``)."""
    return load_sql_records(source, db_dir, limit)
