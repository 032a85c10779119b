"""Math tasks: the shipped benchmarks (MATH-500, AIME 2024/2025, GSM8K) or your own files.

``load_math_tasks("math500")`` reads a file shipped in this folder and checks its record count;
``load_math_tasks("my.jsonl")`` / ``"my.parquet"`` / ``"org/hf-dataset"`` reads your data, finding
the question in ``problem``/``question``/``prompt`` and the gold answer in ``answer`` (a GSM8K
``#### n`` solution or a ``\\boxed{}`` solution also works).  See ``SOURCES.md`` for origins.
"""

from tir_envs.data.math.loader import MATH_DATASETS, load_math_tasks, shipped_path

__all__ = ["MATH_DATASETS", "load_math_tasks", "shipped_path"]
