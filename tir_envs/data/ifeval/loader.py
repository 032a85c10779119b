"""IFEval's 541 prompts as tasks (an evaluation set: never train on it).

Each task's ``question`` is the prompt; its instructions are in ``meta["instruction_id_list"]``
and ``meta["kwargs"]`` (one argument dict per instruction), which ``IFEvalReward`` reads.  The
reward has no gold answer to compare with, so ``answer`` is ``None``.  ``meta["domain"]`` is
``"instruction"`` and ``meta["tool"]`` is ``None``: on AutoTIR's open-domain tasks any tool, or
none, is a fair choice.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from tir_envs.data.ifeval.arguments import validate_kwargs
from tir_envs.data.loaders import DatasetError, check_record, expect_count, iter_located_jsonl
from tir_envs.task import Task

IFEVAL_FILE = Path(__file__).with_name("ifeval_input_data.jsonl")
IFEVAL_COUNT = 541
DOMAIN = "instruction"


@functools.lru_cache(maxsize=1)
def _records() -> tuple[dict[str, Any], ...]:
    records = []
    for where, record in iter_located_jsonl(IFEVAL_FILE):
        check_record(record, ("key", "prompt", "instruction_id_list", "kwargs"), where)
        ids, kwargs = record["instruction_id_list"], record["kwargs"]
        if len(ids) != len(kwargs):
            raise DatasetError(f"{where}: {len(ids)} instruction ids but {len(kwargs)} kwargs")
        try:
            for iid, kw in zip(ids, kwargs):
                validate_kwargs(iid, kw)
        except ValueError as exc:
            raise DatasetError(f"{where}: {exc}") from exc
        records.append(record)
    expect_count(records, IFEVAL_COUNT, IFEVAL_FILE.name)
    return tuple(records)


def ifeval_prompts() -> list[str]:
    """The 541 prompts as written (for overlap checks against training data)."""
    return [r["prompt"] for r in _records()]


def load_ifeval(limit: int | None = None) -> list[Task]:
    """IFEval's prompts as tasks, ids ``ifeval-<key>``, in the file's order."""
    return [Task(id=f"ifeval-{r['key']}", question=r["prompt"], answer=None,
                 meta={"dataset": "ifeval", "key": r["key"], "domain": DOMAIN, "tool": None,
                       "instruction_id_list": list(r["instruction_id_list"]),
                       "kwargs": [dict(kw) for kw in r["kwargs"]]})
            for r in _records()[:limit]]
