"""Shipped math benchmarks (sizes, gold answers) and loading user files with precise errors."""

from __future__ import annotations

import json

import pytest

from tir_envs.data.loaders import DatasetError
from tir_envs.data.math import MATH_DATASETS, load_math_tasks, shipped_path
from tir_envs.data.math import loader

AIME2025_KEY = ("70 588 16 117 279 504 821 77 62 81 259 510 204 60 735 "
                "468 49 82 106 336 293 237 610 149 907 113 19 248 104 240").split()


@pytest.mark.parametrize("name, size", [("math500", 500), ("aime2024", 30), ("aime2025", 30),
                                        ("gsm8k", 1319)])
def test_shipped_sizes_and_fields(name, size):
    tasks = load_math_tasks(name)
    assert len(tasks) == size == MATH_DATASETS[name].count
    assert len({t.id for t in tasks}) == size
    assert all(isinstance(t.question, str) and t.question.strip() for t in tasks)
    assert all(isinstance(t.answer, str) and t.answer for t in tasks)
    assert all(t.meta["dataset"] == name for t in tasks)


def test_gold_answers_are_final_answers():
    assert load_math_tasks("aime2025") and [t.answer for t in load_math_tasks("aime25")] \
        == AIME2025_KEY
    aime24 = load_math_tasks("aime2024")
    assert all(t.answer.isdigit() and not t.answer.startswith("0") for t in aime24)
    padded = [t for t in aime24 if t.meta.get("raw_answer", "").startswith("0")]
    assert padded and all(int(t.meta["raw_answer"]) == int(t.answer) for t in padded)
    gsm = load_math_tasks("gsm8k")
    assert gsm[0].answer == "18" and "####" in gsm[0].meta["solution"]
    assert all(t.answer.lstrip("-").isdigit() for t in gsm)  # '1,600' became '1600'
    math500 = load_math_tasks("math500")
    assert math500[0].answer == "\\left( 3, \\frac{\\pi}{2} \\right)"
    assert math500[0].meta["subject"] == "Precalculus"


def test_limit_and_aliases():
    assert [t.id for t in load_math_tasks("MATH-500", limit=3)] == \
        [t.id for t in load_math_tasks("math500")[:3]]
    with pytest.raises(ValueError, match="limit"):
        load_math_tasks("gsm8k", limit=0)
    assert shipped_path("aime24").name == "aime2024.jsonl"


def test_unknown_name_is_a_clear_error():
    with pytest.raises(DatasetError, match="unknown math dataset 'math5000'.*math500"):
        load_math_tasks("math5000")


def test_damaged_shipped_file_is_detected(monkeypatch):
    spec = MATH_DATASETS["aime2024"]
    monkeypatch.setitem(MATH_DATASETS, "aime2024",
                        loader.ShippedDataset(spec.file, 31, spec.id_field, spec.description))
    loader._load_shipped.cache_clear()
    try:
        with pytest.raises(DatasetError, match="expected 31 records, found 30"):
            load_math_tasks("aime2024")
    finally:
        loader._load_shipped.cache_clear()


def _write(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_user_jsonl_field_forms(tmp_path):
    path = _write(tmp_path / "mine.jsonl", [
        {"question": "q1", "answer": "He has #### 1,234"},
        {"problem": "q2", "solution": "so the answer is $\\boxed{\\frac{1}{2}}$."},
        {"prompt": "q3", "answer": 7, "id": "seven"},
        "",
        {"question": "q4", "final_answer": "x = 2"},
    ])
    tasks = load_math_tasks(path)
    assert [t.answer for t in tasks] == ["1234", "\\frac{1}{2}", "7", "x = 2"]
    assert [t.id for t in tasks] == ["mine/0", "mine/1", "mine/seven", "mine/3"]
    assert "####" in tasks[0].meta["solution"] and "boxed" in tasks[1].meta["solution"]


def test_custom_field_names(tmp_path):
    path = _write(tmp_path / "c.jsonl", [{"text": "q", "gold": "3"}])
    (task,) = load_math_tasks(path, question_field="text", answer_field="gold")
    assert (task.question, task.answer) == ("q", "3")
    with pytest.raises(DatasetError, match=r"c.jsonl:1: missing field 'gold2'"):
        load_math_tasks(path, question_field="text", answer_field="gold2")


@pytest.mark.parametrize("rows, where, what", [
    ([{"problem": "a", "answer": "1"}, "{not json"], ":2:", "invalid JSON"),
    ([{"problem": "a", "answer": "1"}, {"problem": "b"}], ":2:", "no answer field"),
    ([{"answer": "1"}], ":1:", "no question field"),
    ([{"problem": 5, "answer": "1"}], ":1:", "field 'problem' must be a non-empty string"),
    ([{"problem": "a", "answer": ["1", "2"]}], ":1:", "field 'answer' holds no final answer"),
    ([{"problem": "a", "solution": "no box here"}], ":1:", "field 'solution' holds no final"),
    ([["problem", "answer"]], ":1:", "expected a JSON object"),
])
def test_malformed_jsonl_names_file_line_and_field(tmp_path, rows, where, what):
    path = _write(tmp_path / "bad.jsonl", rows)
    with pytest.raises(DatasetError) as err:
        load_math_tasks(path)
    assert f"bad.jsonl{where}" in str(err.value) and what in str(err.value)


def test_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow")  # in the dev extra; Parquet support needs it
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"problem": ["q1", "q2"], "answer": ["1", None]}), path)
    with pytest.raises(DatasetError, match=r"t.parquet:row 1: no answer field"):
        load_math_tasks(path)
    pq.write_table(pa.table({"problem": ["q1"], "answer": ["\\frac12"]}), path)
    assert load_math_tasks(path)[0].answer == "\\frac12"


def test_missing_file(tmp_path):
    with pytest.raises(DatasetError, match="no such file"):
        load_math_tasks(tmp_path / "nope.jsonl")


@pytest.mark.parametrize("solution, answer", [
    ("4", "4"), (" 025 ", "25"), ("\\frac{1}{2}", "\\frac{1}{2}"), ("x = 2", "x = 2"),
    ("Monday", "Monday"), ("\\text{Monday}", "\\text{Monday}"),
    ("so it is $\\boxed{7}$", "7"), ("3 + 4 = 7\n#### 7", "7"),
])
def test_a_solution_field_that_is_the_answer_is_taken(tmp_path, solution, answer):
    """``{"problem": ..., "solution": "4"}``: a short solution is its own final answer."""
    path = _write(tmp_path / "s.jsonl", [{"problem": "2+2?", "solution": solution}])
    (task,) = load_math_tasks(path)
    assert task.answer == answer and task.meta["solution"] == solution


@pytest.mark.parametrize("solution", [
    "no box here", "First add 2 and 2, then the result is 4", "4\n5", "1" * 51])
def test_a_worked_solution_without_its_answer_says_what_is_missing(tmp_path, solution):
    path = _write(tmp_path / "s.jsonl", [{"problem": "2+2?", "solution": solution}])
    with pytest.raises(DatasetError) as err:
        load_math_tasks(path)
    message = str(err.value)
    assert "s.jsonl:1: field 'solution' holds no final answer" in message
    assert "\\boxed{...}" in message and "Add an 'answer' field" in message
    assert "expected a string" not in message  # the old message contradicted the record


def test_plain_string_tasks_warn_once_how_to_give_answers(monkeypatch):
    """``tasks=["1+1?"]`` runs (inference needs no gold) but says, once, that it cannot be
    graded and how to give answers; tasks with answers say nothing."""
    import warnings

    import tir_envs
    from tir_envs import task as task_module
    monkeypatch.setattr(task_module, "_WARNED", [])
    with pytest.warns(task_module.MissingAnswerWarning, match=r"'answer': \.\.\.") as record:
        env = tir_envs.make("tir/MathCode-v0", tasks=["1+1?", "2+2?"])
        tir_envs.make("tir/MathCode-v0", tasks=["3+3?"]).close()
    assert len([w for w in record if w.category is task_module.MissingAnswerWarning]) == 1
    env.reset(seed=0)
    *_, info = env.step(env.unwrapped.codec.encode("\\boxed{2}"))
    assert info["trajectory"].correct is None and info["trajectory"].reward == 0.0
    env.close()
    monkeypatch.setattr(task_module, "_WARNED", [])
    with warnings.catch_warnings():
        warnings.simplefilter("error", task_module.MissingAnswerWarning)
        graded = tir_envs.make("tir/MathCode-v0", tasks=[{"question": "1+1?", "answer": "2"}])
        graded.reset(seed=0)
        *_, info = graded.step(graded.unwrapped.codec.encode("\\boxed{2}"))
        assert info["trajectory"].correct is True
        graded.close()
