"""Agreement of this project's SQL verdict (``tir_envs.rewards.sql.match``) with the reference
verdict, Spider's execution match, on the shipped Spider dev set, as JSON.

Pairs, per question (972): the prediction is Spider's gold, SpiderMan's rewrite of it
(MySQL-style, backticks) or Spider's gold with every name quoted in backticks, double quotes or
brackets; the gold is Spider's text or its backtick spelling (SkyRL/OmniSQL data): 10 pairs a
question, 9,720 in all.  Every prediction returns what its gold returns on the database except
where SpiderMan's rewrite changes the answer (19 questions), so a disagreement is a verdict one
side gets wrong or a rule the two sides hold differently.

The reference verdict is the rule of Spider's test-suite evaluation (``exec_eval``) on one
database, written here from its documented behaviour (no code of it is vendored): both
queries run on SQLite with ``DISTINCT`` removed; a prediction that fails is wrong; two empty
results match whatever their widths; otherwise the row counts and widths must be equal and
some mapping of the prediction's columns onto the gold's must give the gold's rows, in order
when ``order by`` appears in the gold's text, else as a multiset; values compare with
Python's ``==``.  Where this project's rule differs by design (``docs/sql.md``: ``DISTINCT``
kept, empty results witnessed on populated copies, float tolerance, ties), the pairs say so.

Run: ``python benchmarks/perf/sql_agreement.py [--details]`` (``PERF_QUICK=1``: 3 databases).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import sqlite3
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tir_envs.bench.perf.quick import QUICK  # noqa: E402
from tir_envs.bench.sql_quoting import quote_identifiers, schema_names  # noqa: E402

from tir_envs.data.spider import load_spider  # noqa: E402
from tir_envs.rewards.sql import match, task_database  # noqa: E402

QUICK_DATABASES = ["pets_1", "concert_singer", "student_transcripts_tracking"]
_DISTINCT = re.compile(r"\bdistinct\b", re.IGNORECASE)
#: seconds a reference query may run (SQLite's progress handler stops it)
REFERENCE_TIMEOUT_S = 30.0


def _rows(con: sqlite3.Connection, sql: str) -> list[tuple] | None:
    """The query's rows with ``DISTINCT`` removed, or ``None`` when it fails."""
    deadline = time.monotonic() + REFERENCE_TIMEOUT_S
    con.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        return [tuple(r) for r in con.execute(_DISTINCT.sub("", sql)).fetchall()]
    except (sqlite3.Error, ValueError, OverflowError):
        return None


def _mappings(gold: list[tuple], pred: list[tuple]):
    """Every mapping of the prediction's columns onto the gold's that keeps each column's
    multiset of values (the others cannot give the gold's rows)."""
    width = len(gold[0])
    key = lambda rows, i: Counter(repr(r[i]) for r in rows)  # noqa: E731
    options = [[i for i in range(width) if key(pred, i) == key(gold, j)] for j in range(width)]
    for choice in itertools.product(*options):
        if len(set(choice)) == width:
            yield choice


def reference_verdict(pred_rows: list[tuple] | None, gold_rows: list[tuple],
                      order_matters: bool) -> bool:
    """Spider's execution match of two results (see the module docstring)."""
    if pred_rows is None:
        return False
    if not gold_rows and not pred_rows:
        return True
    if len(gold_rows) != len(pred_rows) or len(gold_rows[0]) != len(pred_rows[0]):
        return False
    for mapping in _mappings(gold_rows, pred_rows):
        mapped = [tuple(r[i] for i in mapping) for r in pred_rows]
        if (mapped == gold_rows) if order_matters else (Counter(mapped) == Counter(gold_rows)):
            return True
    return False


def _spellings(task, names: set[str]) -> tuple[dict[str, str], dict[str, str]]:
    """The predictions and golds of one question (see the module docstring)."""
    gold = task.answer
    quoted = {style: quote_identifiers(gold, names, style)
              for style in ("backtick", "double", "bracket")}
    preds = {"spider": gold, "spiderman": task.meta["spiderman_query"], **quoted}
    return preds, {"spider": gold, "backtick": quoted["backtick"]}


def measure(db_ids: list[str] | None) -> dict:
    tasks = load_spider(db_ids)
    agree, total, statuses = 0, 0, Counter()
    by_gold: dict[str, list[int]] = {}
    disagreements = []
    connections: dict[str, sqlite3.Connection] = {}
    for task in tasks:
        db = task_database(task)
        if db not in connections:
            connections[db] = sqlite3.connect(Path(db).resolve().as_uri() + "?mode=ro",
                                              uri=True)
            connections[db].text_factory = lambda b: b.decode(errors="replace")
        con = connections[db]
        preds, golds = _spellings(task, schema_names(db))
        for gold_name, gold in golds.items():
            gold_rows = _rows(con, gold) or []
            order = "order by" in gold.lower()
            for pred_name, pred in preds.items():
                ours = match(pred, gold, db)
                ref = reference_verdict(_rows(con, pred), gold_rows, order)
                statuses[ours.status] += 1
                same = ours.correct == ref
                agree += same
                total += 1
                tally = by_gold.setdefault(gold_name, [0, 0])
                tally[0] += same
                tally[1] += 1
                if not same:
                    disagreements.append({"id": task.id, "pred": pred_name, "gold": gold_name,
                                          "ours": ours.status, "reference": ref})
    for con in connections.values():
        con.close()
    return {"questions": len(tasks), "pairs": total, "agree": agree,
            "agreement_pct": round(100 * agree / total, 2) if total else None,
            "agreement_pct_by_gold": {k: round(100 * a / n, 2) for k, (a, n) in by_gold.items()},
            "our_statuses": dict(statuses), "disagreements": disagreements}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--details", action="store_true", help="list every disagreement")
    args = parser.parse_args()
    start = time.perf_counter()
    out = {"load": os.getloadavg(), **measure(QUICK_DATABASES if QUICK else None)}
    out["seconds"] = round(time.perf_counter() - start, 1)
    if not args.details:
        disagreements = out.pop("disagreements")
        out["disagreements_by_kind"] = dict(Counter(
            f"{d['pred']}->{d['gold']}: ours {d['ours']}, reference {d['reference']}"
            for d in disagreements))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
