"""LogiQA (Liu et al. 2020), English test set: 651 four-option logical-reasoning questions.

The file keeps the original layout: per question a blank line, the right option (``a``-``d``),
the passage, the question, and four option lines ``A.``-``D.``.  Options carry their own
labels, and in 19 questions they are listed out of order (``A. C. B. D.``); the gold letter
refers to the label (checked by solving some of those by hand), so options are keyed by their
label and shown in A-D order.  Two questions have garbled labels (a label moved inside the
text); their options are labelled by position.

Tasks: ``question`` = passage, question and the four labelled options; ``answer`` = the letter
(``"A"``-``"D"``); ``meta["domain"] = "multiple_choice"``, ``meta["tool"] = None``.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from tir_envs.data.loaders import DatasetError, expect_count
from tir_envs.task import Task

LOGIQA_FILE = Path(__file__).with_name("logiqa_en_test.txt")
LOGIQA_COUNT = 651
LETTERS = ("A", "B", "C", "D")
DOMAIN = "multiple_choice"
_LABEL = re.compile(r"^([A-D])(?:[.?]\s*|\s+)")
_LINES_PER_RECORD = 8


def parse_logiqa(text: str, source: str = "logiqa") -> list[dict]:
    """Records ``{context, query, options (A-D order), answer}`` from LogiQA's text layout."""
    lines = text.split("\n")
    records = []
    for start in range(0, len(lines) - _LINES_PER_RECORD + 1, _LINES_PER_RECORD):
        block = lines[start:start + _LINES_PER_RECORD]
        where = f"{source}:{start + 1}"
        if block[0].strip() or block[1].strip().lower() not in ("a", "b", "c", "d"):
            raise DatasetError(f"{where}: expected a blank line then the answer letter a-d, "
                               f"got {block[0][:30]!r}, {block[1][:30]!r}")
        records.append({"context": block[2].strip(), "query": block[3].strip(),
                        "options": _options(block[4:]), "answer": block[1].strip().upper()})
    return records


def _options(option_lines: list[str]) -> list[str]:
    """The four option texts in A-D order, by their own labels when all four are there."""
    matches = [_LABEL.match(line) for line in option_lines]
    labels = [m.group(1) if m else None for m in matches]
    if sorted(filter(None, labels)) == list(LETTERS):
        by_label = {m.group(1): line[m.end():].strip() for m, line in zip(matches, option_lines)}
        return [by_label[letter] for letter in LETTERS]
    return [(line[m.end():] if m and m.group(1) == letter else line).strip()
            for m, letter, line in zip(matches, LETTERS, option_lines)]


def format_question(context: str, query: str, options: list[str]) -> str:
    """Passage, question and the labelled options, one per line."""
    choices = "\n".join(f"{letter}. {option}" for letter, option in zip(LETTERS, options))
    return f"{context}\n{query}\n{choices}"


@functools.lru_cache(maxsize=1)
def _records() -> tuple[dict, ...]:
    records = parse_logiqa(LOGIQA_FILE.read_text(encoding="utf-8"), LOGIQA_FILE.name)
    expect_count(records, LOGIQA_COUNT, LOGIQA_FILE.name)
    return tuple(records)


def load_logiqa(limit: int | None = None) -> list[Task]:
    """The English LogiQA test set as tasks, ids ``logiqa-<index>``."""
    return [Task(id=f"logiqa-{i}", question=format_question(r["context"], r["query"], r["options"]),
                 answer=r["answer"],
                 meta={"dataset": "logiqa", "domain": DOMAIN, "tool": None,
                       "options": list(r["options"])})
            for i, r in enumerate(_records()[:limit])]
