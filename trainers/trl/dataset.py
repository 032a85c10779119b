"""TRL training data for a ``tir/*`` env: one JSONL row per task, ``{"prompt": label}``.

TRL hands ``rollout_func`` only the ``prompt`` column, so the prompt column carries the task
label (its id in the env's task set, or with ``--inline`` the whole task as JSON; the format of
``tir_envs.trainers.common.labels``); the env renders the real prompt at reset.  Load it with
``datasets.load_dataset("json", data_files=...)``.

    python -m tir_envs.trainers.trl.dataset --env tir/MathCode-v0 --tasks math500 --out train.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Sequence

from tir_envs.trainers.common.dataset_cli import dataset_main
from tir_envs.trainers.common.env_config import EnvConfig
from tir_envs.trainers.common.labels import records


def rows(config: EnvConfig, tokenizer: Any = None, inline: bool = False,
         limit: int | None = None) -> list[dict[str, str]]:
    return [{"prompt": r["label"]} for r in records(config, tokenizer, inline, limit)]


def write_dataset(config: EnvConfig, out: str | Path, tokenizer: Any = None,
                  inline: bool = False, limit: int | None = None) -> int:
    data = rows(config, tokenizer, inline, limit)
    Path(out).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in data),
                         encoding="utf-8")
    return len(data)


def main(argv: Sequence[str] | None = None) -> int:
    return dataset_main(argv, "python -m tir_envs.trainers.trl.dataset",
                        "Write TRL training data (JSONL, the task label as the prompt) from a "
                        "tir/* env's task set.", "output JSONL path", write_dataset)


if __name__ == "__main__":
    sys.exit(main())
