"""OpenRLHF prompt datasets for a ``tir/*`` env (labels: ``tir_envs.trainers.common.labels``).

One JSONL record per task, read by OpenRLHF with ``--data.input_key prompt
--data.label_key label``:

* ``prompt``: the env's own prompt text for the task (its template, rendered with the
  tokenizer's chat template).  The adapter re-renders it from the task at ``reset`` and only
  checks that the two agree (a mismatch means the dataset was made for another env setting).
* ``label``: the task, either its ``id`` in the env's task set (default: short, and the gold
  answer stays out of the dataset) or, with ``--inline``, the whole task as a JSON object
  (``{"id", "question", "answer", "meta"}``) so the env needs no task set at all.

Write one from any task set the env can load::

    python -m tir_envs.trainers.openrlhf.dataset --env tir/MathCode-v0 --tasks math500 --out math500.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Sequence

from tir_envs.trainers.common.dataset_cli import dataset_main
from tir_envs.trainers.common.env_config import EnvConfig
from tir_envs.trainers.common.labels import records


def write_dataset(config: EnvConfig, out: str | Path, tokenizer: Any = None,
                  inline: bool = False, limit: int | None = None) -> int:
    """Write the env's tasks as an OpenRLHF prompt dataset; returns the number of records."""
    data = list(records(config, tokenizer, inline, limit))  # a refused row: nothing written
    Path(out).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in data),
                         encoding="utf-8")
    return len(data)


def main(argv: Sequence[str] | None = None) -> int:
    return dataset_main(argv, "python -m tir_envs.trainers.openrlhf.dataset",
                        "Write an OpenRLHF prompt dataset (JSONL: prompt, label) from a tir/* "
                        "env's task set.", "output JSONL path", write_dataset)


if __name__ == "__main__":
    sys.exit(main())
