"""Training rows and the trainer's env take their tasks from one place (issue 46): the dataset
writers read the trainer's own env file (``--env-config``: a verl agent-loop file or a
``TIR_ENV_CONFIG`` file), and a row whose task that env cannot find is refused when the file is
written, not at the trainer's first step."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from tir_envs.trainers.common.env_config import ConfigError, EnvConfig
from tir_envs.trainers.common.training_data import main as training_data
from tir_envs.trainers.openrlhf.dataset import main as write_jsonl

ROOT = Path(__file__).resolve().parents[1]
TORL_AGENT = "trainers/verl/configs/torl_math_agent.yaml"


@pytest.fixture
def run_dir(tmp_path):
    """A folder laid out as the recipe's: the repository's ``trainers/`` and the training file
    the docs write (``data/math_train.jsonl``)."""
    (tmp_path / "trainers").symlink_to(ROOT / "trainers")
    (tmp_path / "data").mkdir()
    with contextlib.chdir(tmp_path):
        assert training_data(["math", "--n", "3", "--out", "data/math_train.jsonl"]) == 0
        yield tmp_path


def labels(path: Path) -> list[str]:
    return [json.loads(line)["label"] for line in path.read_text().splitlines()]


def test_rows_from_the_agent_file_are_the_training_files_tasks(run_dir):
    assert write_jsonl(["--env-config", TORL_AGENT, "--out", "rows.jsonl"]) == 0
    written = [json.loads(line) for line in Path("data/math_train.jsonl").read_text().splitlines()]
    env = EnvConfig.from_file(TORL_AGENT).make()  # the env the trainer runs
    try:
        tasks = list(env.unwrapped.tasks)
    finally:
        env.close()
    assert [t.question for t in tasks] == [w["question"] for w in written]  # not MATH-500
    assert labels(Path("rows.jsonl")) == [t.id for t in tasks]  # every row names one of them


def test_id_rows_from_another_task_set_are_refused(run_dir, capsys):
    with pytest.raises(SystemExit) as exc:
        write_jsonl(["--env-config", TORL_AGENT, "--tasks", "math500", "--out", "rows.jsonl"])
    assert exc.value.code == 2 and not Path("rows.jsonl").exists()
    assert "data/math_train.jsonl" in capsys.readouterr().err  # names the env's own task set


def test_a_validation_set_with_whole_tasks_may_come_from_elsewhere(run_dir):
    assert write_jsonl(["--env-config", TORL_AGENT, "--tasks", "aime2024", "--inline",
                        "--limit", "2", "--out", "val.jsonl"]) == 0
    rows = [json.loads(x) for x in labels(Path("val.jsonl"))]
    assert len(rows) == 2 and all(r["question"] and r["answer"] for r in rows)


def test_an_id_two_tasks_share_is_refused_when_written(tmp_path, capsys):
    tasks = tmp_path / "dup.jsonl"
    tasks.write_text("".join(json.dumps({"id": "same", "question": f"What is {i}+1?",
                                         "answer": str(i + 1)}) + "\n" for i in range(2)))
    out = tmp_path / "rows.jsonl"
    assert write_jsonl(["--env", "tir/MathCode-v0", "--tasks", str(tasks), "--out", str(out)]) == 2
    assert "occurs twice" in capsys.readouterr().err and not out.exists()


def test_the_env_is_given_one_way(run_dir, capsys):
    for argv in (["--env", "tir/MathCode-v0", "--env-config", TORL_AGENT],
                 ["--env-config", TORL_AGENT, "--env-kwargs", '{"protocol": "zerotir"}'], []):
        with pytest.raises(SystemExit):
            write_jsonl([*argv, "--out", "rows.jsonl"])
    with pytest.raises(ConfigError, match="names no env_id"):
        EnvConfig.from_file("trainers/verl/agent_loop.yaml")  # the env comes from TIR_ENV_*
