"""``tir-envs rollout`` end to end, on a test env id registered for the test."""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import pytest

from tir_envs import registry
from tir_envs.cli import main
from tir_envs.trajectory import read_jsonl

ENV_ID = "test/Lookup-v0"


@pytest.fixture(autouse=True)
def lookup_env_id(monkeypatch):
    monkeypatch.setitem(registry.ENV_SPECS, ENV_ID, "tests.fixtures.rollout_envs:LookupEnv")
    gym.register(id=ENV_ID, entry_point="tests.fixtures.rollout_envs:LookupEnv")
    yield
    gym.registry.pop(ENV_ID, None)


@pytest.fixture()
def files(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["<search>paris</search>", "<answer>42</answer>"]))
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("\n".join(json.dumps(t) for t in [
        {"id": "a", "question": "q1", "answer": "42"},
        {"id": "b", "question": "q2", "answer": "7"},
        {"id": "c", "question": "q3", "answer": "42"}]) + "\n")
    return script, tasks, tmp_path / "traj.jsonl"


def test_rollout_streams_trajectories_and_prints_a_summary(files, capsys):
    script, tasks, out = files
    code = main(["rollout", "--env", ENV_ID, "--policy", f"scripted:{script}", "--tasks",
                 str(tasks), "--limit", "2", "--samples", "2", "--out", str(out),
                 "--env-arg", "max_turns=3", "--no-progress", "--mode", "sync"])
    assert code == 0
    back = read_jsonl(out)
    assert sorted(t.task_id for t in back) == ["a", "a", "b", "b"]
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["episodes"] == 4 and summary["tool_calls"] == 4
    assert summary["mean_reward"] == 0.5 and summary["out"] == str(out)


def test_rollout_with_a_transformers_model_folder(files, tmp_path, capsys):
    pytest.importorskip("torch")
    from tests.fixtures.tiny import tiny_qwen2, tiny_tokenizer

    folder = tmp_path / "model"
    tok = tiny_tokenizer()
    tiny_qwen2(tok).save_pretrained(folder)
    tok.save_pretrained(folder)
    _, tasks, out = files
    assert main(["rollout", "--env", ENV_ID, "--policy", f"hf:{folder}", "--tasks", str(tasks),
                 "--max-tokens", "8", "--seed", "0", "--out", str(out), "--no-progress"]) == 0
    back = read_jsonl(out)
    assert len(back) == 3 and all(t.has_logprobs and t.num_policy_tokens for t in back)
    # the env used the model folder's tokenizer: ids are in its 462-token vocabulary
    assert max(max(t.prompt_ids + t.token_ids) for t in back) < len(tok)


@pytest.mark.parametrize("policy, message", [
    ("nonsense", "expected KIND:TARGET"),
    ("magic:thing", "unknown kind 'magic'"),
    ("hf:/no/such/folder", "not a local model folder"),
    ("openai:http://127.0.0.1:1/v1", "needs --model"),
    ("scripted:/no/such.json", "no such file"),
])
def test_bad_policy_specs_are_explained(files, policy, message, capsys):
    _, tasks, out = files
    assert main(["rollout", "--env", ENV_ID, "--policy", policy, "--tasks", str(tasks),
                 "--out", str(out)]) == 2
    assert_one_line(capsys.readouterr().err, message)


def assert_one_line(err: str, message: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tir-envs rollout: error: "), err
    assert message in lines[0] and "Traceback" not in err


def test_bad_env_arg_and_tasks_are_explained(files, capsys):
    script, tasks, out = files
    base = ["rollout", "--env", ENV_ID, "--policy", f"scripted:{script}", "--out", str(out)]
    assert main(base + ["--tasks", str(tasks), "--env-arg", "max_turns"]) == 2
    assert_one_line(capsys.readouterr().err, "expected KEY=VALUE")
    assert main(base + ["--tasks", "/no/tasks.jsonl"]) == 2
    assert_one_line(capsys.readouterr().err, "no such file")
    assert main(base + ["--tasks", str(tasks), "--env-arg", "no_such_arg=1"]) == 1
    assert_one_line(capsys.readouterr().err, "unknown argument(s) ['no_such_arg']")


def test_every_episode_failing_is_a_failed_run(files, tmp_path, capsys):
    _, tasks, out = files
    crash = tmp_path / "crash.json"
    crash.write_text(json.dumps(["<python>crash</python>"]))
    code = main(["rollout", "--env", ENV_ID, "--policy", f"scripted:{crash}", "--tasks",
                 str(tasks), "--out", str(out), "--no-progress"])
    assert code == 1
    err = [ln for ln in capsys.readouterr().err.splitlines() if "tir-envs rollout" in ln]
    assert len(err) == 1 and "error: all 3 episodes failed" in err[0]
    assert "a tool failed (infra_error) at turn 0" in err[0]
    assert len(read_jsonl(out)) == 3  # the flagged episodes are still written


@pytest.mark.parametrize("args, message, code", [
    (["--samples", "0"], "argument --samples: must be a positive integer, got 0", 2),
    (["--concurrency", "x"], "argument --concurrency: expected a positive integer, got 'x'", 2),
    (["--timeout", "-1"], "argument --timeout: must be a number of seconds > 0, got -1", 2),
    (["--env", "tir/Nope-v0"], "unknown env id 'tir/Nope-v0'; valid ids:", 2),
    (["--out", "EXISTING"], "already exists; pass --overwrite to replace it", 2),
    (["--out", "/no/such/dir/t.jsonl"], "folder '/no/such/dir' does not exist", 2),
])
def test_cli_errors_are_one_line_without_a_traceback(tmp_path, args, message, code):
    """In a fresh process, as a user runs it: one line on stderr, a non-zero status."""
    existing = tmp_path / "old.jsonl"
    existing.write_text("{}\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["<answer>42</answer>"]))
    base = {"--env": "tir/MathCode-v0", "--policy": f"scripted:{script}",
            "--out": str(tmp_path / "new.jsonl")}
    given = dict(zip(args[::2], [str(existing) if a == "EXISTING" else a for a in args[1::2]]))
    argv = [x for kv in {**base, **given}.items() for x in kv]
    run = subprocess.run([sys.executable, "-m", "tir_envs.cli", "rollout", *argv],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == code
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert lines[0].startswith("tir-envs rollout: error: ") and message in lines[0], lines[0]
    assert existing.read_text() == "{}\n"  # an existing file is never clobbered


def test_tasks_takes_a_dataset_name_the_env_ships(tmp_path, capsys):
    """``--tasks aime2024`` is the env's shipped set (as ``tasks="aime2024"`` is), ``--limit``
    its first N; the policy answers AIME 2024's first problem right, so reward shows it."""
    from tir_envs.data.math import load_math_tasks
    first = load_math_tasks("aime2024")[0]
    script = tmp_path / "answer.json"
    script.write_text(json.dumps([f"So the answer is \\boxed{{{first.answer}}}."]))
    out = tmp_path / "aime.jsonl"
    assert main(["rollout", "--env", "tir/MathCode-v0", "--policy", f"scripted:{script}",
                 "--tasks", "aime2024", "--limit", "2", "--out", str(out), "--no-progress"]) == 0
    back = read_jsonl(out)
    assert [t.task_id for t in back] == [t.id for t in load_math_tasks("aime2024")[:2]]
    assert [t.correct for t in back] == [True, False]


def test_an_unknown_dataset_name_lists_the_shipped_ones(tmp_path, capsys):
    script = tmp_path / "answer.json"
    script.write_text(json.dumps(["\\boxed{1}"]))
    assert main(["rollout", "--env", "tir/MathCode-v0", "--policy", f"scripted:{script}",
                 "--tasks", "aime2042", "--out", str(tmp_path / "o.jsonl")]) == 1
    assert_one_line(capsys.readouterr().err, "unknown math dataset 'aime2042'")
    assert not (tmp_path / "o.jsonl").exists()
    assert main(["rollout", "--env", "tir/MathCode-v0", "--policy", f"scripted:{script}",
                 "--tasks", "aime2024", "--env-arg", "tasks=gsm8k",
                 "--out", str(tmp_path / "o.jsonl")]) == 2
    assert_one_line(capsys.readouterr().err, "give one of them")
