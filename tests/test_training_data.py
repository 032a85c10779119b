"""Training never silently runs on an evaluation set (issue 35, item 2): the guard matches
questions (not paths) against every shipped bench suite, the dataset writers and the GRPO
trainer warn loudly, and the training-file command refuses a file holding eval questions."""

from __future__ import annotations

import json
import warnings

import pytest

from tir_envs.data.math.loader import load_math_tasks
from tir_envs.trainers.common.eval_guard import (EvalOverlapError, EvalOverlapWarning,
                                        check_training_tasks, evaluation_overlap)
from tir_envs.trainers.common.training_data import main as training_data


def test_eval_questions_are_found_by_content_wherever_the_file_lives(tmp_path):
    tasks = load_math_tasks("math500")[:7]
    copy = tmp_path / "my_train.jsonl"  # a renamed copy elsewhere is still MATH-500
    copy.write_text("".join(json.dumps({"question": "  " + t.question.upper() + "\n",
                                        "answer": t.answer}) + "\n" for t in tasks))
    rows = [json.loads(line) for line in copy.read_text().splitlines()]
    assert evaluation_overlap(rows) == {"math500": 7}
    with pytest.warns(EvalOverlapWarning, match=r"7 of 7 training tasks .*'math500'"):
        check_training_tasks(rows, "data.path")
    with pytest.raises(EvalOverlapError, match="data.path"):
        check_training_tasks(rows, "data.path", strict=True)


def test_the_stand_in_training_file_holds_no_eval_question(tmp_path):
    out = tmp_path / "math_train.jsonl"
    assert training_data(["math", "--n", "300", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 300 and evaluation_overlap(rows) == {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_training_tasks(rows, "x")  # silent


def test_converting_an_eval_set_is_refused(tmp_path, capsys):
    src = tmp_path / "gsm.jsonl"
    tasks = load_math_tasks("gsm8k")[:3]
    src.write_text("".join(json.dumps({"q": t.question, "a": t.answer}) + "\n" for t in tasks))
    out = tmp_path / "train.jsonl"
    code = training_data(["convert", str(src), "--question-field", "q", "--answer-field", "a",
                          "--out", str(out)])
    assert code == 2 and not out.exists()
    assert "gsm8k" in capsys.readouterr().err


def test_the_dataset_writers_and_grpo_warn_on_an_eval_set(tmp_path):
    from tir_envs.trainers.common.env_config import EnvConfig
    from tir_envs.trainers.common.labels import records
    from tir_envs.trainers.grpo.tasks import load_tasks

    with pytest.warns(EvalOverlapWarning, match="tasks='math500'"):
        list(records(EnvConfig("tir/MathCode-v0", {"tasks": "math500"}), limit=2))
    train = tmp_path / "t.jsonl"
    assert training_data(["math", "--n", "20", "--out", str(train)]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", EvalOverlapWarning)
        assert len(load_tasks(str(train), "train", None, lambda: None)) == 20


def test_no_adapter_doc_trains_on_an_evaluation_set():
    """Every dataset-writer command and every env ``tasks`` in the adapters' docs names a
    training file, never a shipped evaluation suite or its dataset name."""
    import re
    from pathlib import Path

    from tir_envs.bench.suites import SUITES
    from tir_envs.data.math.loader import MATH_DATASETS

    eval_names = set(SUITES) | set(MATH_DATASETS) | {"hotpotqa_distractor", "spider"}
    docs = Path(__file__).resolve().parents[1] / "docs"
    for name in ("openrlhf.md", "trl.md", "verl.md", "grpo.md"):
        text = (docs / name).read_text(encoding="utf-8")
        # a dataset written for validation (its --out says so) may come from an eval set
        text = "\n".join(ln for ln in text.replace("\\\n", " ").splitlines()
                         if not re.search(r"--out\s+\S*_val\b", ln))
        named = re.findall(r"--tasks\s+(\S+)", text) + re.findall(
            r'\\?"tasks\\?":\s*\\?"([^"\\]+)', text)
        assert all(n.strip("'\"") not in eval_names for n in named), (name, named)
