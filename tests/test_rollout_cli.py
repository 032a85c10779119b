"""``tir-envs rollout`` end to end, on a test env id registered for the test."""

from __future__ import annotations

import json

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
def test_bad_policy_specs_are_explained(files, policy, message):
    _, tasks, out = files
    with pytest.raises(SystemExit, match=message):
        main(["rollout", "--env", ENV_ID, "--policy", policy, "--tasks", str(tasks),
              "--out", str(out)])


def test_bad_env_arg_and_tasks_are_explained(files):
    script, tasks, out = files
    base = ["rollout", "--env", ENV_ID, "--policy", f"scripted:{script}", "--out", str(out)]
    with pytest.raises(SystemExit, match="expected KEY=VALUE"):
        main(base + ["--tasks", str(tasks), "--env-arg", "max_turns"])
    with pytest.raises(SystemExit, match="no such file"):
        main(base + ["--tasks", "/no/tasks.jsonl"])
