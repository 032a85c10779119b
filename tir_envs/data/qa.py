"""QA datasets shipped with the package, user QA files, and the HotpotQA paragraph corpus.

Shipped sets (see ``tir_envs/data/qa/SOURCES.md`` for origin and licenses) load as ``Task``s
whose ``answer`` is the list of gold aliases; every load checks the record count.
``hotpotqa_paragraphs`` turns the contexts of the HotpotQA dev-distractor subset into a small,
self-consistent retrieval corpus: every gold supporting paragraph is in it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from tir_envs.data.loaders import DatasetError, expect_count, iter_jsonl, read_records
from tir_envs.task import Task


@dataclass(frozen=True)
class QASet:
    """One shipped file: its name on disk, how many records it must have, what it is."""

    file: str
    count: int
    description: str


QA_SETS: dict[str, QASet] = {
    "hotpotqa_distractor": QASet("hotpotqa_dev_distractor_1100.jsonl.gz", 1100,
                                 "HotpotQA dev-distractor subset with contexts"),
    "hotpotqa": QASet("hotpotqa_dev_simplified_7405.jsonl.gz", 7405,
                      "the full HotpotQA dev question list (Search-R1's HotpotQA eval set)"),
    "hotpotqa_500": QASet("hotpotqa_dev_500.jsonl.gz", 500, "HotpotQA dev sample (R1-Searcher)"),
    "2wiki": QASet("2wikimultihopqa_dev_500.jsonl.gz", 500,
                   "2WikiMultihopQA dev sample (R1-Searcher)"),
    "musique": QASet("musique_dev_500.jsonl.gz", 500, "MuSiQue dev sample (R1-Searcher)"),
    "bamboogle": QASet("bamboogle_test_125.jsonl.gz", 125, "Bamboogle test (all 125)"),
    "nq": QASet("nq_open_test_3610.jsonl.gz", 3610, "NQ-open test (= NQ-open dev split)"),
}
#: earlier names of shipped sets; the names above are the benchmark suites' (``tir-envs bench``)
QA_ALIASES = {"2wiki_500": "2wiki", "musique_500": "musique", "nq_open": "nq"}

#: unique (title, paragraph) pairs in the distractor contexts; guards the corpus build
HOTPOTQA_PARAGRAPHS = 10_785

#: fields that may hold the gold answers in a user's QA file, in order of preference
ANSWER_FIELDS = ("golden_answers", "answers", "answer")


def qa_data_dir() -> Path:
    """Folder of the shipped QA files."""
    return Path(str(resources.files("tir_envs") / "data" / "qa"))


@functools.lru_cache(maxsize=None)
def _shipped_records(name: str) -> tuple[dict[str, Any], ...]:
    spec = _spec(name)
    records = tuple(iter_jsonl(qa_data_dir() / spec.file, ("question", "answer")))
    expect_count(records, spec.count, f"{spec.file} ({name})")
    return records


def _spec(name: str) -> QASet:
    if name not in QA_SETS:
        raise ValueError(f"unknown QA set {name!r}; shipped sets: {', '.join(QA_SETS)} "
                         "(or load your own file with load_qa_file)")
    return QA_SETS[name]


def qa_set_name(name: str) -> str:
    """The one name of a shipped QA set (an alias such as ``nq_open`` gives ``nq``)."""
    return QA_ALIASES.get(name, name)


def load_qa(name: str, limit: int | None = None) -> list[Task]:
    """A shipped QA set as tasks (``answer`` = list of gold aliases, ``meta['dataset']``)."""
    name = qa_set_name(name)
    records = _shipped_records(name)[:limit]
    return [_task(r, i, name, "") for i, r in enumerate(records)]


def load_qa_tasks(source: str | Path) -> list[Task]:
    """A shipped QA set by name, else your own QA file (``load_qa_file``), else a Hugging Face
    dataset ``owner/name``."""
    if qa_set_name(str(source)) in QA_SETS:
        return load_qa(str(source))
    if not Path(source).exists() and "/" not in str(source):
        raise DatasetError(f"unknown QA set {str(source)!r}: not a file, and not one of the "
                           f"shipped sets {sorted(QA_SETS)}")
    return load_qa_file(source)


def load_qa_file(source: str | Path, limit: int | None = None, dataset: str = "") -> list[Task]:
    """Tasks from your own ``.jsonl``/``.parquet`` QA file (or a Hugging Face dataset name).

    Each record needs ``question`` and one of ``golden_answers`` (FlashRAG / Search-R1),
    ``answers`` or ``answer`` (a string or a list of strings).
    """
    rows = read_records(source, required=("question",))
    tasks = []
    for i, row in enumerate(rows[:limit]):
        field = next((f for f in ANSWER_FIELDS if row.get(f) is not None), None)
        if field is None:
            raise DatasetError(f"{source}:record {i + 1}: no gold answer; add one of "
                               f"{list(ANSWER_FIELDS)} (has {sorted(row)})")
        tasks.append(_task({**row, "answer": row[field]}, i, dataset or Path(source).stem, str(source)))
    return tasks


def _task(record: dict[str, Any], index: int, dataset: str, where: str) -> Task:
    answer = record["answer"]
    golds = [answer] if isinstance(answer, str) else answer
    if not isinstance(golds, list) or not golds or not all(isinstance(g, str) for g in golds):
        raise DatasetError(f"{where or dataset}:record {index + 1}: field 'answer' must be a "
                           f"string or a non-empty list of strings, got {answer!r}")
    rid = record.get("_id", record.get("id", record.get("idx", index)))
    meta: dict[str, Any] = {"dataset": dataset}
    for key in ("type", "level"):
        if key in record:
            meta[key] = record[key]
    if "supporting_facts" in record:
        meta["supporting_titles"] = sorted({title for title, _ in record["supporting_facts"]})
    return Task(id=f"{dataset}/{rid}", question=record["question"], answer=list(golds),
                meta=meta)


def hotpotqa_paragraphs() -> list[dict[str, str]]:
    """The retrieval corpus of the shipped HotpotQA subset: one record per context paragraph.

    Records are ``{"id", "title", "text"}``, deduplicated by title (a title is one Wikipedia
    paragraph in HotpotQA; two titles occur twice with a no-break space written differently,
    the first spelling is kept), ids ``"0"``… in order of first appearance.  The sentences of a
    paragraph are joined as HotpotQA stores them (each carries its own leading space).
    """
    seen: dict[str, str] = {}
    for record in _shipped_records("hotpotqa_distractor"):
        for title, sentences in record["context"]:
            seen.setdefault(title, "".join(sentences).strip())
    docs = [{"id": str(i), "title": t, "text": x} for i, (t, x) in enumerate(seen.items())]
    expect_count(docs, HOTPOTQA_PARAGRAPHS, "hotpotqa paragraph corpus")
    return docs
