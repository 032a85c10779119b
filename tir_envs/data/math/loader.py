"""Loading math tasks from the shipped benchmarks or from JSONL / Parquet / Hugging Face data.

Every record becomes a ``Task`` whose ``answer`` is the gold *final* answer as a string: a GSM8K
worked solution is cut to the number after ``####`` (thousands separators removed), a solution
with ``\\boxed{}`` to the boxed answer, an AIME ``"025"`` to ``"25"``.  The original is kept in
``meta``.  A record that cannot be used is reported with its file, line (or row) and field.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from tir_envs.data.loaders import (DatasetError, check_record, expect_count,
                                    iter_located_jsonl, read_records)
from tir_envs.data.math import adapters
from tir_envs.formats.boxed import last_boxed_answer
from tir_envs.task import Task
from tir_envs.validation import check_positive_int

QUESTION_FIELDS = ("problem", "question", "prompt")
ANSWER_FIELDS = ("answer", "final_answer", "solution")
_LEADING_ZEROS = re.compile(r"0+\d+")


@dataclass(frozen=True)
class ShippedDataset:
    """A benchmark file shipped in this folder and the record count it must have (after
    ``adapt``, which rewrites each raw record and may drop it: ``tir_envs.data.math.adapters``).
    ``license``: the data's license, as ``SOURCES.md`` beside the file gives it."""

    file: str
    count: int
    id_field: str | None
    description: str
    license: str = ""
    adapt: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None


MATH_DATASETS: dict[str, ShippedDataset] = {
    "math500": ShippedDataset("math500.jsonl", 500, "unique_id", "MATH-500 (PRM800K test split)",
                              "MIT"),
    "aime2024": ShippedDataset("aime2024.jsonl", 30, "id", "AIME 2024 I and II",
                               "MIT (simpleRL-reason); problems (c) MAA"),
    "aime2025": ShippedDataset("aime2025.jsonl", 30, "id", "AIME 2025 I and II",
                               "Apache-2.0 (AReaL); problems (c) MAA"),
    "gsm8k": ShippedDataset("gsm8k.jsonl", 1319, None, "GSM8K test", "MIT"),
    "amc23": ShippedDataset("amc23.jsonl", 40, "id", "AMC 2023 12A and 12B (AI-MO numbering)",
                            "MIT (simpleRL-reason, Qwen2.5-Math eval); problems (c) MAA",
                            adapters.amc23),
    "minerva_math": ShippedDataset("minerva_math.jsonl", 272, "idx",
                                   "Minerva Math (MIT OCW courses)",
                                   "MIT (repositories); OCW content CC BY-NC-SA 4.0"),
    "olympiadbench": ShippedDataset("olympiadbench.jsonl", 675, "id",
                                    "OlympiadBench, English math, open-ended, text-only",
                                    "MIT (OlympiadBench, (c) 2024 OpenBMB)",
                                    adapters.olympiadbench),
    "hmmt_feb2025": ShippedDataset("hmmt_feb2025.jsonl", 30, "id",
                                   "HMMT February 2025 individual rounds",
                                   "MIT (matharena, (c) 2024 SRI Lab ETH Zurich); problems (c) "
                                   "HMMT; MathArena's later release is CC BY-NC-SA 4.0"),
    "theoremqa": ShippedDataset("theoremqa.jsonl", 747, "id",
                                "TheoremQA test, the 747 questions without a figure",
                                "MIT (TIGER-AI-Lab/TheoremQA)", adapters.theoremqa),
    "theoremqa_all": ShippedDataset("theoremqa.jsonl", 800, "id",
                                    "TheoremQA test, all 800 (53 need a figure not shipped)",
                                    "MIT (TIGER-AI-Lab/TheoremQA)", adapters.theoremqa_all),
}
_ALIASES = {"math-500": "math500", "math_500": "math500", "aime24": "aime2024",
            "aime25": "aime2025", "aime_2024": "aime2024", "aime_2025": "aime2025",
            "gsm8k_test": "gsm8k", "amc": "amc23", "minerva": "minerva_math",
            "hmmt": "hmmt_feb2025", "hmmt_feb_2025": "hmmt_feb2025"}


def shipped_path(name: str) -> Path:
    """Path of a shipped benchmark file by dataset name (``math500``, ``aime2024``, ...)."""
    key = _ALIASES.get(name.lower(), name.lower())
    if key not in MATH_DATASETS:
        raise KeyError(f"no shipped math dataset {name!r}; shipped: {sorted(MATH_DATASETS)}")
    return Path(__file__).with_name(MATH_DATASETS[key].file)


def gold_answer(value: Any) -> str | None:
    """The final answer in a gold ``answer``/``solution`` value, as a string (None if none)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return str(value)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if "####" in text:
        text = text.rsplit("####", 1)[1].strip().replace(",", "")
    elif "\\boxed" in text or "\\fbox" in text:
        text = last_boxed_answer(text) or ""
    if _LEADING_ZEROS.fullmatch(text):
        text = str(int(text))
    return text or None


def _located_records(source: str | Path, split: str, **hf_kwargs: Any
                     ) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, record)`` pairs; ``where`` is ``file:line`` (JSONL) or ``source:row i``."""
    path = Path(source)
    if path.suffix == ".jsonl":
        yield from iter_located_jsonl(path)
        return
    label = str(source) if path.suffix == ".parquet" else f"{source}[{split}]"
    for i, record in enumerate(read_records(source, split=split, **hf_kwargs)):
        yield f"{label}:row {i}", record


def _pick(record: dict[str, Any], given: str | None, candidates: Sequence[str], what: str,
          where: str) -> str:
    """The field holding ``what``: the one given, else the first candidate present."""
    if given is not None:
        check_record(record, [given], where)
        return given
    for name in candidates:
        if record.get(name) is not None:
            return name
    raise DatasetError(f"{where}: no {what} field; expected one of {list(candidates)} (or pass "
                       f"{what}_field=...); the record has {sorted(record)}")


#: a bare final answer given as a ``solution``: one line, short, at most one word once LaTeX
#: commands are dropped ("4", "x = 2", "\\frac{1}{2}", "Monday"; not "no box here")
_BARE_ANSWER_CHARS = 50
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")
_WORD = re.compile(r"[A-Za-z]{2,}")


def is_bare_answer(text: str) -> bool:
    """Whether a ``solution`` without ``\\boxed{}`` or ``####`` is itself the final answer."""
    text = text.strip()
    return (bool(text) and "\n" not in text and len(text) <= _BARE_ANSWER_CHARS
            and len(_WORD.findall(_LATEX_COMMAND.sub(" ", text))) <= 1)


def _final_answer(value: Any, field: str, where: str) -> str:
    """The gold final answer in ``value`` (the record's ``field``), or an error saying which
    form was expected and what the record has instead."""
    if field != "solution" or not isinstance(value, str):
        answer = gold_answer(value)
        if answer is None:
            raise DatasetError(f"{where}: field {field!r} holds no final answer: expected a "
                               f"non-empty string or a number, got {type(value).__name__} "
                               f"{str(value)[:60]!r}")
        return answer
    # A worked solution counts through its boxed (or '#### n') final answer; a short one
    # with neither is the answer itself.
    if "####" in value or "\\boxed" in value or "\\fbox" in value:
        answer = gold_answer(value)
    else:
        answer = gold_answer(value) if is_bare_answer(value) else None
    if answer is None:
        raise DatasetError(
            f"{where}: field 'solution' holds no final answer: a worked solution needs it in "
            "\\boxed{...} or after '#### ', and a bare answer must be one short line (at most "
            f"{_BARE_ANSWER_CHARS} characters, one word); got {value.strip()[:60]!r}. Add an "
            "'answer' field, or name the field with answer_field=...")
    return answer


def record_to_task(record: Any, where: str, index: int, dataset: str = "",
                   question_field: str | None = None, answer_field: str | None = None,
                   id_field: str | None = None) -> Task:
    """One record as a Task, or a ``DatasetError`` naming ``where`` and the field at fault."""
    check_record(record, [], where)
    qf = _pick(record, question_field, QUESTION_FIELDS, "question", where)
    af = _pick(record, answer_field, ANSWER_FIELDS, "answer", where)
    question = record[qf]
    if not isinstance(question, str) or not question.strip():
        raise DatasetError(f"{where}: field {qf!r} must be a non-empty string, got "
                           f"{type(question).__name__} {str(question)[:40]!r}")
    answer = _final_answer(record[af], af, where)
    raw_id = record.get(id_field) if id_field else record.get("id", record.get("unique_id"))
    task_id = str(raw_id) if raw_id is not None else str(index)
    if dataset:
        task_id = f"{dataset}/{task_id}"
    meta = {k: v for k, v in record.items() if k not in (qf, af, "question", "problem")}
    meta["dataset"] = dataset
    raw = record[af]
    if af == "solution" or (isinstance(raw, str) and "####" in raw):
        meta["solution"] = raw
    elif str(raw).strip() != answer:
        meta["raw_answer"] = raw
    return Task(id=task_id, question=question, answer=answer, meta=meta)


@functools.lru_cache(maxsize=8)
def _load_shipped(key: str) -> tuple[Task, ...]:
    spec = MATH_DATASETS[key]
    path = Path(__file__).with_name(spec.file)
    records = ((where, spec.adapt(rec) if spec.adapt else rec)
               for where, rec in _located_records(path, "test"))
    tasks = [record_to_task(rec, where, i, key, id_field=spec.id_field)
             for i, (where, rec) in enumerate((w, r) for w, r in records if r is not None)]
    expect_count(tasks, spec.count, f"{path} ({spec.description})")
    return tuple(tasks)


def load_math_tasks(source: str | Path = "math500", *, split: str = "test",
                    question_field: str | None = None, answer_field: str | None = None,
                    limit: int | None = None, **hf_kwargs: Any) -> list[Task]:
    """Tasks from a shipped benchmark name, a ``.jsonl``/``.parquet`` file, or an HF dataset.

    Shipped names: ``math500``, ``aime2024``, ``aime2025``, ``gsm8k``, ``amc23``,
    ``minerva_math``, ``olympiadbench``, ``hmmt_feb2025``, ``theoremqa`` (text-only;
    ``theoremqa_all`` with the figure questions); sizes checked (``MATH_DATASETS``).  ``question_field``/``answer_field`` name the fields when they are not the usual
    ones.  ``limit`` keeps the first ``limit`` tasks.
    """
    check_positive_int(limit=limit, allow_none=True)
    key = _ALIASES.get(str(source).lower(), str(source).lower())
    if key in MATH_DATASETS and not Path(source).exists():
        tasks = list(_load_shipped(key))
    elif not Path(source).exists() and Path(source).suffix not in (".jsonl", ".parquet") \
            and "/" not in str(source):
        raise DatasetError(f"unknown math dataset {str(source)!r}: not a shipped name "
                           f"({', '.join(sorted(MATH_DATASETS))}), not an existing .jsonl/.parquet "
                           "file, and not a Hugging Face name ('org/name')")
    else:
        name = Path(source).stem
        tasks = [record_to_task(rec, where, i, name, question_field, answer_field)
                 for i, (where, rec) in enumerate(_located_records(source, split, **hf_kwargs))]
        if not tasks:
            raise DatasetError(f"{source}: no records")
    return tasks[:limit] if limit else tasks
