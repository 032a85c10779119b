"""How the records of the shipped competition files become tasks (issue 33's suites).

Each adapter takes one raw record and returns the record to load (``None``: not loaded).  It
writes the gold answer in the form the grader and an honest policy write it, keeps the file's
own value in ``meta["raw_answer"]``, and records the answer's form in
``answer_form`` where the reward must compare by form, not as one math expression:

* ``"bool"`` (TheoremQA True/False), ``"option"`` (TheoremQA's ``(a)``-``(d)``),
  ``"ordered_list"`` (TheoremQA's vectors ``[a, b]``: order matters, unlike a solution set).

OlympiadBench's ``unit`` field stays on the task: the reward strips that unit from an answer
that writes it (``tir_envs.rewards.math.forms``).
"""

from __future__ import annotations

from typing import Any

#: TheoremQA's ``answer_type`` -> the reward's ``answer_form``
_THEOREMQA_FORMS = {"bool": "bool", "option": "option", "list of integer": "ordered_list",
                    "list of float": "ordered_list"}


def _number(value: float | int) -> str:
    """A number as its gold string: a whole float as an integer (AMC's ``27.0`` -> ``27``)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def amc23(record: dict[str, Any]) -> dict[str, Any]:
    """AMC 2023: every answer is a whole number stored as a float."""
    return {**record, "answer": _number(record["answer"]), "raw_answer": record["answer"]}


def olympiadbench(record: dict[str, Any]) -> dict[str, Any]:
    """OlympiadBench: ``final_answer[0]`` without its ``$`` delimiters; the ``$,$`` between the
    answers of a multi-answer item becomes ``, `` (a list the grader compares as a set)."""
    text = record["final_answer"][0].strip().strip("$").replace("$,$", ", ").replace("$", "")
    return {**record, "answer": text.strip().rstrip(".").strip()}


def theoremqa(record: dict[str, Any], with_figures: bool = False) -> dict[str, Any] | None:
    """TheoremQA: text-only questions unless ``with_figures`` (the figures are not shipped);
    booleans, options and lists get their ``answer_form``."""
    if record.get("picture") and not with_figures:
        return None
    answer, form = record["answer"], _THEOREMQA_FORMS.get(record.get("answer_type", ""))
    if isinstance(answer, bool):
        text = "True" if answer else "False"
    elif isinstance(answer, list):
        text = "[" + ", ".join(_number(a) for a in answer) + "]"
    elif isinstance(answer, (int, float)):
        text = _number(answer)
    else:
        text = str(answer).strip()
    out = {**record, "answer": text, "raw_answer": answer}
    if form:
        out["answer_form"] = form
    return out


def theoremqa_all(record: dict[str, Any]) -> dict[str, Any] | None:
    """TheoremQA with the 53 questions that need a figure (not shipped: unanswerable here)."""
    return theoremqa(record, with_figures=True)
