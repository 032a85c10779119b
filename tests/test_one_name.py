"""Issue 36 item 4: one name per thing (dataset and suite names work both ways), and
``rollout`` takes the sanity policies ``oracle``/``wrong`` as ``bench`` does."""

from __future__ import annotations

import json

import pytest

from tir_envs.bench.suites import SUITE_ALIASES, SUITES, get_suite
from tir_envs.cli import main
from tir_envs.trajectory import read_jsonl


@pytest.mark.parametrize("alias, name", [("aime2024", "aime24"), ("aime2025", "aime25"),
                                         ("math-500", "math500"), ("nq_open", "nq"),
                                         ("hotpotqa_distractor", "hotpotqa")])
def test_suite_aliases_name_the_suite(alias, name):
    assert get_suite(alias) is SUITES[name]


def test_every_suite_alias_is_a_name_the_env_side_knows():
    """An alias is an env dataset's own name for the suite's file, never an invention."""
    from tir_envs.data.math.loader import shipped_path
    from tir_envs.data.qa import QA_ALIASES, QA_SETS

    for alias, name in SUITE_ALIASES.items():
        part = SUITES[name].parts[0]
        if part.scoring == "math":
            assert shipped_path(alias).name == part.path().name
        else:
            set_name = QA_ALIASES.get(alias, alias)
            assert QA_SETS[set_name].file == part.path().name


def test_env_datasets_take_the_suite_names():
    from tir_envs.data.autotir import load_autotir_tasks
    from tir_envs.data.math.loader import shipped_path

    assert [t.id for t in load_autotir_tasks("aime2024")] == \
        [t.id for t in load_autotir_tasks("aime24")]
    assert shipped_path("aime25") == shipped_path("aime2025")


def test_bench_cli_takes_the_dataset_name(tmp_path, capsys):
    code = main(["bench", "--suite", "aime2024", "--policy", "oracle", "--limit", "2",
                 "--out", str(tmp_path / "run"), "--no-progress"])
    assert code == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["accuracy_pct"] == \
        {"aime24": 100.0, "avg": 100.0}


def test_bench_list_shows_the_aliases(capsys):
    assert main(["bench", "list"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("aime24 "))
    assert "also: aime2024" in line


@pytest.mark.parametrize("policy, correct", [("oracle", True), ("wrong", False)])
def test_rollout_takes_the_sanity_policies(tmp_path, capsys, policy, correct):
    out = tmp_path / "traj.jsonl"
    code = main(["rollout", "--env", "tir/MathCode-v0", "--tasks", "aime24", "--limit", "3",
                 "--policy", policy, "--out", str(out), "--no-progress"])
    assert code == 0
    runs = read_jsonl(out)
    assert len(runs) == 3 and all(t.correct is correct for t in runs)
    assert all(t.num_tool_calls == 0 and t.answered for t in runs)


def test_rollout_oracle_on_tasks_without_gold_says_so(tmp_path):
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(json.dumps({"question": "say hi"}) + "\n")
    code = main(["rollout", "--env", "tir/MathCode-v0", "--tasks", str(tasks), "--policy",
                 "oracle", "--out", str(tmp_path / "o.jsonl"), "--no-progress"])
    assert code == 1
