"""``tir/ToolUse-v0``: a user's function (or an MCP server, or the project's tools) becomes an
env that steps, audits, benchmarks and trains, with no ``Tool`` subclass written."""

from __future__ import annotations

import json
import sys

import pytest

import tir_envs
from tir_envs.cli import main
from tir_envs.envs.tool_use import ToolUseEnv
from tir_envs.rewards.base import RewardResult
from tir_envs.tools import function_tool
from tests.openenv_helpers import CAPITALS_MODULE

TASKS = [{"question": "What is the capital of France?", "answer": "Paris"},
         {"question": "What is the capital of Japan?", "answer": "Tokyo"},
         {"question": "What is the capital of Italy?", "answer": "Rome"}]
CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Italy": "Rome"}


def capital(country: str) -> str:
    """The capital city of a country.

    Args:
        country: the country's English name, e.g. "France".
    """
    if country not in CAPITALS:
        raise KeyError(f"no capital known for {country!r}")
    return CAPITALS[country]


MODULE = CAPITALS_MODULE  # the user's tools module, as a file (tests/openenv_helpers.py)


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "my_tools.py").write_text(MODULE)
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("my_tools", None)


def play(env, *actions):
    obs, info = env.reset(options={"index": 0})
    out = []
    for action in actions:
        out.append(env.step(action))
    return obs, out


def test_a_function_becomes_an_env():
    env = tir_envs.make("tir/ToolUse-v0", tasks=TASKS, tools=[capital])
    u = env.unwrapped
    obs, info = env.reset(options={"index": 0})
    prompt = u.codec.decode(obs["tokens"])
    assert '"name": "capital"' in prompt and "the country's English name" in prompt
    assert info["stop_sequences"] == ["</tool_call>"]
    obs, r, term, trunc, info = env.step(u.protocol.render_call("capital", "France"))
    assert "Paris" in u.codec.decode(obs["tokens"]) and info["turn"].status == "ok"
    obs, r, term, trunc, info = env.step("<answer>Paris</answer>")
    t = info["trajectory"]
    assert term and r == 1.0 and t.correct and t.answer == "Paris" and t.num_tool_calls == 1
    env.close()


def test_the_answer_is_read_only_from_the_policys_final_prose():
    env = ToolUseEnv(tasks=TASKS, tools=[capital])
    # the gold inside a call, or as a tool's output, is no answer
    _, steps = play(env, '<tool_call>{"name": "capital", "arguments": {"country": "France"}}'
                         '</tool_call>', "I think it is Lyon. <answer>Lyon</answer>")
    assert steps[-1][1] == 0.0 and steps[-1][4]["trajectory"].answer == "Lyon"
    _, steps = play(env, 'no answer here, Paris')
    assert steps[-1][1] == 0.0 and steps[-1][4]["trajectory"].answered is False
    env.close()


def test_a_raising_function_is_a_tool_error_observation():
    env = ToolUseEnv(tasks=TASKS, tools=[capital])
    _, steps = play(env, '<tool_call>{"name": "capital", "arguments": {"country": "Mars"}}'
                         '</tool_call>')
    obs, r, term, trunc, info = steps[0]
    assert info["turn"].status == "tool_error" and not term
    assert "no capital known for 'Mars'" in env.codec.decode(obs["tokens"])
    env.close()


@pytest.mark.parametrize("reward,answer,value", [
    ("f1", "the Paris city", 2 / 3), ("em", "paris", 1.0),
    (lambda task, trajectory, answer: answer == task.answer.upper(), "PARIS", 1.0),
    (lambda task, trajectory, answer: RewardResult(0.5, {"half": 0.5}), "x", 0.5)])
def test_rewards(reward, answer, value):
    env = ToolUseEnv(tasks=TASKS, tools=[capital], reward=reward)
    _, steps = play(env, f"<answer>{answer}</answer>")
    assert steps[-1][1] == pytest.approx(value)
    env.close()


def test_math_reward_uses_the_grader():
    def calc(expression: str) -> str:
        """Evaluate arithmetic."""
        return str(eval(expression, {"__builtins__": {}}))  # noqa: S307 - test digits only
    env = ToolUseEnv(tasks=[{"question": "1/2 + 1/4?", "answer": "3/4"}], tools=[calc],
                     reward="math")
    _, steps = play(env, "<answer>\\boxed{0.75}</answer>")
    assert steps[-1][1] == 1.0 and steps[-1][4]["trajectory"].correct
    env.close()


def test_tools_by_module_path_and_the_projects_own(user_module):
    env = ToolUseEnv(tasks=str(user_module / "tasks.jsonl"), tools=["my_tools:capital", "python"],
                     tool_timeout_s=5)
    assert sorted(env.tools) == ["capital", "python"]
    _, steps = play(env, env.protocol.render_call("python", "print(6 * 7)"))
    assert "42" in env.codec.decode(steps[0][0]["tokens"])
    env.close()


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="has no tasks: pass tasks="):
        ToolUseEnv(tools=[capital]).reset()
    with pytest.raises(ValueError, match="at least one tool"):
        ToolUseEnv(tasks=TASKS)
    with pytest.raises(ValueError, match="cannot import 'nope_module'"):
        ToolUseEnv(tasks=TASKS, tools=["nope_module:f"])
    with pytest.raises(ValueError, match="reward must be one of em, f1, math, a Reward"):
        ToolUseEnv(tasks=TASKS, tools=[capital], reward="bleu")
    with pytest.raises(ValueError, match=r"two tools are named \['capital'\]"):
        ToolUseEnv(tasks=TASKS, tools=[capital, function_tool(capital)])
    with pytest.raises(TypeError, match="configure shipped tools that tools= does not include"):
        ToolUseEnv(tasks=TASKS, tools=[capital], topk=3)


def test_mcp_tools_in_the_env(tmp_path):
    pytest.importorskip("mcp")
    from tests.mcp_helpers import stdio_command
    from tir_envs.tools.mcp_tools import McpTools
    server = McpTools(stdio_command(tmp_path), include=["add"])
    try:
        envs = [tir_envs.make("tir/ToolUse-v0", tasks=[{"question": "2+40?", "answer": "42"}],
                              tools=[server, capital]) for _ in range(2)]
        for env in envs:  # one server for the pool
            u = env.unwrapped
            env.reset(options={"index": 0})
            obs, *_ = env.step('<tool_call>{"name": "add", "arguments": {"a": 2, "b": 40}}'
                               '</tool_call>')
            assert "42" in u.codec.decode(obs["tokens"])
            *_, info = env.step("<answer>42</answer>")
            assert info["trajectory"].correct
            env.close()
        report = tir_envs.audit(lambda: ToolUseEnv(tasks=[{"question": "2+40?", "answer": "42"},
                                                          {"question": "1+1?", "answer": "2"}],
                                                   tools=[server]), tasks=2)
        assert report.ok, report.to_markdown()
    finally:
        server.close()


def test_audit_cli_on_a_users_function(user_module, capsys):
    code = main(["audit", "tir/ToolUse-v0", "--env-arg", f"tasks={user_module / 'tasks.jsonl'}",
                 "--env-arg", 'tools=["my_tools:capital"]', "--out", str(user_module / "audit")])
    assert code == 0, capsys.readouterr()
    report = json.loads((user_module / "audit" / "audit.json").read_text())
    assert report["env"] == "tir/ToolUse-v0"


def test_bench_cli_on_a_users_function(user_module, capsys):
    for policy, expected in (("oracle", 100.0), ("wrong", 0.0)):
        out = user_module / f"run-{policy}"
        code = main(["bench", "--tasks", str(user_module / "tasks.jsonl"), "--env",
                     "tir/ToolUse-v0", "--env-arg", 'tools=["my_tools:capital"]', "--policy",
                     policy, "--out", str(out), "--no-progress"])
        assert code == 0
        line = capsys.readouterr().out.strip().splitlines()[-1]
        assert json.loads(line)["accuracy_pct"]["avg"] == expected


def test_one_grpo_step_on_cpu(tmp_path):
    torch = pytest.importorskip("torch")
    from tir_envs.trainers.grpo.config import GRPOConfig
    from tir_envs.trainers.grpo.trainer import GRPOTrainer
    from tir_envs.tokenizer import qwen25_tokenizer

    def varied(task, trajectory, answer):
        """A reward that differs inside a group, so the step has a gradient (a random model
        never answers): the share of even token ids in what the policy wrote."""
        ids = [i for i, m in zip(trajectory.token_ids, trajectory.loss_mask) if m]
        return sum(i % 2 == 0 for i in ids) / max(1, len(ids))

    tok = qwen25_tokenizer()
    config = GRPOConfig.load("toy", [f"train.output_dir={tmp_path}", "train.tensorboard=false",
                                     "train.steps=1", "rollout.tasks_per_step=2",
                                     "rollout.samples_per_task=2", "rollout.max_tokens=6",
                                     "algorithm.mask_void=false",
                                     "model.random_init.max_position_embeddings=1024"])
    trainer = GRPOTrainer(config, tokenizer=tok, tasks=TASKS[:2],
                          env=lambda: ToolUseEnv(tasks=TASKS[:2], tools=[capital],
                                                 reward=varied, tokenizer=tok, max_turns=2))
    before = [p.detach().clone() for p in trainer.model.parameters()]
    rows = trainer.train()
    assert [r["step"] for r in rows] == [1]
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))
