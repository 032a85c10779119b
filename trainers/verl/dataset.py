"""verl training data for a ``tir/*`` env: one Parquet row per task.

verl's ``RLHFDataset`` needs a ``prompt`` column of chat messages; the agent loop ignores it
(the env renders its own prompt from the task) and reads the task from
``extra_info.tir_task``: the task's id in the env's task set, or with ``--inline`` the whole
task as JSON (the label format of ``tir_envs.trainers.common.labels``).  ``prompt`` holds the env's
rendered prompt as one user message, so verl's ``filter_overlong_prompts`` sees about the
right length; ``agent_name`` routes every row to the ``tir_agent`` loop.

    python -m tir_envs.trainers.verl.dataset --env-config trainers/verl/configs/torl_math_agent.yaml \
        --tokenizer /models/Qwen2.5-Math-1.5B --out data/torl.parquet
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

from tir_envs.trainers.common.dataset_cli import dataset_main
from tir_envs.trainers.common.env_config import EnvConfig
from tir_envs.trainers.common.labels import records

AGENT_NAME = "tir_agent"


def rows(config: EnvConfig, tokenizer: Any = None, inline: bool = False,
         limit: int | None = None) -> list[dict[str, Any]]:
    """The verl rows for the env's tasks."""
    return [{"data_source": config.env_id, "agent_name": AGENT_NAME,
             "prompt": [{"role": "user", "content": r["prompt"]}],
             "extra_info": {"index": i, "tir_task": r["label"]}}
            for i, r in enumerate(records(config, tokenizer, inline, limit))]


def write_dataset(config: EnvConfig, out: str | Path, tokenizer: Any = None,
                  inline: bool = False, limit: int | None = None) -> int:
    """Write the rows as Parquet (needs pyarrow, which verl's ``datasets`` brings)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = rows(config, tokenizer, inline, limit)
    pq.write_table(pa.Table.from_pylist(data), str(out))
    return len(data)


def main(argv: Sequence[str] | None = None) -> int:
    return dataset_main(argv, "python -m tir_envs.trainers.verl.dataset",
                        "Write verl training data (Parquet) from a tir/* env's task set.",
                        "output Parquet path", write_dataset)


if __name__ == "__main__":
    sys.exit(main())
