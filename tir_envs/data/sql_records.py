"""Text-to-SQL tasks from your own files: Spider-, BIRD-, SynSQL- and SkyRL-SQL-style records.

Each record becomes a ``Task`` whose ``answer`` is the gold SQL and whose ``meta`` names the
database: ``db_path`` (resolved now, so a missing database fails at load time, naming the file,
record and paths tried) plus ``db_id``.  The record style is read from its fields:

=========  ==========================================================  =======================
style      fields                                                      question shown
=========  ==========================================================  =======================
spider     ``question``, ``query`` (or ``sql``), ``db_id``/``db_path``  the question
bird       ``question``, ``evidence``, ``SQL``, ``db_id``              question + evidence
synsql     ``question``, ``external_knowledge``, ``sql``, ``db_id``    question + knowledge
skyrl      ``prompt`` (chat), ``reward_spec.ground_truth``, ``db_id``,  the question in the
           ``data`` (synsql / spider / bird)                           prompt's user message
=========  ==========================================================  =======================

Evidence (BIRD) and external knowledge (SynSQL) are the hints those datasets give the model;
they are appended to the question as ``Evidence: …`` and kept in ``meta['evidence']``.
Databases are found in ``db_dir`` by ``find_database`` (``<db_id>.sqlite`` or
``<db_id>/<db_id>.sqlite``, and under the OmniSQL release's folder for a record's source: its
``data`` field for SkyRL-SQL, BIRD's or SynSQL's for their styles).  Every SQLite database is queried with SQLite by default.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from tir_envs.data.databases import find_database
from tir_envs.data.loaders import DatasetError, read_records
from tir_envs.task import Task

#: where the question sits in a SkyRL-SQL (OmniSQL template) user message
_SKYRL_QUESTION = re.compile(r"\nQuestion:\s*\n(.*?)\n\s*\nInstructions:", re.DOTALL)


def record_style(row: dict[str, Any]) -> str:
    """``spider`` | ``bird`` | ``synsql`` | ``skyrl`` (see the module doc)."""
    if "reward_spec" in row and "prompt" in row:
        return "skyrl"
    if "SQL" in row and "evidence" in row:
        return "bird"
    if "external_knowledge" in row and "sql" in row:
        return "synsql"
    return "spider"


def load_sql_records(source: str | os.PathLike, db_dir: str | os.PathLike | None = None,
                     limit: int | None = None, dataset: str | None = None) -> list[Task]:
    """Tasks from a ``.jsonl``/``.parquet`` file of records in any style of the module doc.

    ``db_dir``: the databases folder (needed unless every record gives ``db_path``, absolute
    or relative to it).  ``dataset``: ``meta['dataset']`` (default: the file's stem).
    """
    rows = read_records(source, required=())
    name = dataset or Path(str(source)).stem
    tasks = []
    for i, row in enumerate(rows[:limit]):
        where = f"{source}:record {i + 1}"
        if not isinstance(row, dict):
            raise DatasetError(f"{where}: a record must be an object, not {type(row).__name__}")
        style = record_style(row)
        question, gold, evidence = _fields(row, style, where)
        path = _database(row, db_dir, where, row.get("data") or _SOURCE.get(style))
        meta = {"db_id": str(row.get("db_id") or path.stem), "db_path": str(path),
                "dataset": name, "style": style}
        if evidence:
            meta["evidence"] = evidence
            question = f"{question}\nEvidence: {evidence}"
        if style == "skyrl":
            meta["data"] = row.get("data")
        ident = row.get("id", row.get("question_id", i))
        tasks.append(Task(id=str(ident), question=question, answer=gold, meta=meta))
    return tasks


def _fields(row: dict[str, Any], style: str, where: str) -> tuple[str, str, str]:
    """``(question, gold SQL, evidence)`` of one record, with errors naming what is missing."""
    if style == "skyrl":
        spec = row["reward_spec"]
        if isinstance(spec, str):
            spec = json.loads(spec)
        gold = spec.get("ground_truth") if isinstance(spec, dict) else None
        question, evidence = _skyrl_question(row["prompt"], where), ""
    else:
        gold = {"bird": row.get("SQL"), "synsql": row.get("sql")}.get(
            style, row.get("query") or row.get("sql"))
        question = row.get("question")
        evidence = {"bird": row.get("evidence"), "synsql": row.get("external_knowledge")}.get(
            style) or ""
    if not isinstance(gold, str) or not gold.strip():
        raise DatasetError(f"{where}: no gold SQL for a {style}-style record; give "
                           f"{_GOLD_FIELD[style]} (has {sorted(row)})")
    if not isinstance(question, str) or not question.strip():
        raise DatasetError(f"{where}: no question text (has {sorted(row)})")
    return question.strip(), gold.strip(), str(evidence).strip()


_GOLD_FIELD = {"spider": "a 'query' (or 'sql') string", "bird": "an 'SQL' string",
               "synsql": "a 'sql' string", "skyrl": "reward_spec.ground_truth"}


def _skyrl_question(prompt: Any, where: str) -> str:
    """The question inside a SkyRL-SQL prompt's last user message."""
    if isinstance(prompt, str):
        prompt = json.loads(prompt)
    users = [m.get("content", "") for m in prompt if isinstance(m, dict)
             and m.get("role") == "user"]
    if not users:
        raise DatasetError(f"{where}: the SkyRL-SQL prompt has no user message")
    found = _SKYRL_QUESTION.search(users[-1])
    if not found:
        raise DatasetError(f"{where}: no 'Question:' … 'Instructions:' section in the user "
                           "message; give the record a 'question' field instead")
    return found.group(1)


#: the OmniSQL release folder a record style's databases live in (``find_database``)
_SOURCE = {"bird": "bird", "synsql": "synsql"}


def _database(row: dict[str, Any], db_dir: str | os.PathLike | None, where: str,
              data: str | None) -> Path:
    if row.get("db_path"):
        path = Path(row["db_path"])
        if not path.is_absolute() and db_dir is not None:
            path = Path(db_dir) / path
        if not path.exists():
            raise DatasetError(f"{where}: database {path} does not exist")
        return path
    if not row.get("db_id"):
        raise DatasetError(f"{where}: no database; give 'db_path', or 'db_id' together with "
                           f"db_dir=... (has {sorted(row)})")
    if db_dir is None:
        raise DatasetError(f"{where}: record names db_id {row['db_id']!r}; pass db_dir=... "
                           "(the folder holding the databases)")
    try:
        return find_database(str(row["db_id"]), db_dir, data)
    except FileNotFoundError as exc:
        raise DatasetError(f"{where}: {exc}") from None
