"""The env contract: budgets, sessions, errors, async twins, registry, check_env."""

import asyncio

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import tir_envs
from tests.core_helpers import AnswerEnv, CrashTool, EchoTool
from tir_envs.env import EXHAUSTED_NOTICE
from tir_envs.formats import JsonFormat
from tir_envs.tools.base import Status
from tir_envs.trajectory import read_jsonl, to_padded, write_jsonl

CALL = "<python>print(1)</python>"


@pytest.fixture
def tool():
    return EchoTool()


def make_env(tok, tool, **kw):
    return AnswerEnv(tokenizer=tok, tasks=[{"question": "q", "answer": "7"}], tools=[tool], **kw)


def step_text(env, text):
    return env.step(env.codec.encode(text))


def test_check_env_on_base(qwen_tok, tool):
    check_env(make_env(qwen_tok, tool), skip_render_check=True)


def required_args(env_id):
    """The smallest real arguments of the envs that cannot run without some: a user's tools
    (``tir/ToolUse-v0``), a remote env (``tir/OpenEnv-v0``, served here in-process)."""
    if env_id == "tir/ToolUse-v0":
        def echo(text: str) -> str:
            """Echo."""
            return text
        return {"tasks": [{"question": "q", "answer": "a"}], "tools": [echo]}
    if env_id == "tir/OpenEnv-v0":
        pytest.importorskip("openenv")
        from tests.openenv_helpers import guess_app
        return {"app": guess_app()}
    return {}


@pytest.mark.parametrize("env_id", sorted(tir_envs.ENV_SPECS))
def test_check_env_on_every_registered_env(env_id):
    env = gym.make(env_id, **required_args(env_id))
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_tool_budget_inserts_notice_once_and_stops_executing(qwen_tok, tool):
    env = make_env(qwen_tok, tool, max_tool_calls=1, max_turns=5)
    env.reset(seed=0)
    step_text(env, CALL)
    obs, _, term, trunc, info = step_text(env, CALL + CALL)
    text = env.codec.decode(obs["tokens"])
    assert text.count(EXHAUSTED_NOTICE) == 1 and "echo" not in text
    assert not term and not trunc
    assert "tool budget exhausted" in info["turn"].notes
    assert tool.opened == 1


def test_per_tool_budget_dict(qwen_tok, tool):
    env = make_env(qwen_tok, tool, max_tool_calls={"python": 2}, max_turns=5)
    env.reset(seed=0)
    texts = [env.codec.decode(step_text(env, CALL)[0]["tokens"]) for _ in range(3)]
    assert ["echo" in t for t in texts] == [True, True, False]


def test_calls_per_turn_limit(qwen_tok, tool):
    env = make_env(qwen_tok, tool, max_calls_per_turn=1)
    env.reset(seed=0)
    obs, *_, info = step_text(env, "<python>a</python><python>b</python>")
    assert env.codec.decode(obs["tokens"]).count("echo") == 1
    assert len(info["turn"].tool_calls) == 1 and info["turn"].notes


def test_max_turns_truncates_without_running_the_last_call(qwen_tok, tool):
    env = make_env(qwen_tok, tool, max_turns=2)
    env.reset(seed=0)
    step_text(env, CALL)
    obs, reward, term, trunc, info = step_text(env, CALL)
    assert trunc and not term and len(obs["tokens"]) == 0
    assert info["trajectory"].stop_reason == "max_turns"
    assert tool.closed == tool.opened == 1
    with pytest.raises(RuntimeError, match="reset"):
        step_text(env, "more")


def test_observation_truncated_head_and_tail(qwen_tok):
    long = " ".join(f"w{i}" for i in range(400))
    env = make_env(qwen_tok, EchoTool(reply=long), max_obs_tokens=40)
    env.reset(seed=0)
    obs, *_, info = step_text(env, CALL)
    text = env.codec.decode(obs["tokens"])
    assert len(obs["tokens"]) <= 40
    assert "[truncated]" in text and "w0" in text and "w399" in text
    assert any("truncated" in n for n in info["turn"].notes)


def test_total_token_budget(qwen_tok):
    env = make_env(qwen_tok, EchoTool(reply="x " * 200), max_total_tokens=60)
    _, info = env.reset(seed=0)
    assert info["max_new_tokens"] == 60 - len(env.trajectory.prompt_ids)
    _, _, term, trunc, info = step_text(env, CALL)
    traj = info["trajectory"]
    assert trunc and traj.stop_reason == "max_tokens"
    assert len(traj.prompt_ids) + len(traj.token_ids) == 60


def test_botched_calls_are_observations(qwen_tok, tool):
    env = AnswerEnv(tokenizer=qwen_tok, tasks=["q"], tools=[tool], tool_format=JsonFormat())
    env.reset(seed=0)
    obs, _, term, _, info = step_text(
        env, '<tool_call>{"name": "python", "arguments": {"code": </tool_call>'
             '<tool_call>{"name": "web", "arguments": {}}</tool_call>')
    text = env.codec.decode(obs["tokens"])
    assert "invalid JSON" in text and "unknown tool 'web'" in text and "python" in text
    assert not term and info["turn"].status == "tool_error"


def test_infra_failure_flags_trajectory_and_closes_sessions(qwen_tok):
    crash = CrashTool()
    env = make_env(qwen_tok, crash)
    env.reset(seed=0)
    obs, _, _, _, info = step_text(env, CALL)
    assert info["turn"].status == "infra_error"
    assert "not your fault" in env.codec.decode(obs["tokens"])
    _, _, term, _, info = step_text(env, "7")
    assert term and info["trajectory"].infra_failed
    assert crash.closed == crash.opened == 1


def test_reset_closes_sessions_of_an_abandoned_episode(qwen_tok, tool):
    env = make_env(qwen_tok, tool)
    env.reset(seed=0)
    step_text(env, CALL)
    env.reset(seed=1)
    assert tool.opened == tool.closed == 1
    env.close()


def test_async_twins_run_many_episodes_on_one_loop(qwen_tok):
    async def episode(i):
        tool = EchoTool(reply=str(i))
        env = make_env(qwen_tok, tool)
        await env.areset(seed=i)
        obs, *_ = await env.astep(env.codec.encode(CALL))
        _, reward, term, _, info = await env.astep(env.codec.encode("7"))
        return env.codec.decode(obs["tokens"]), reward, tool.closed

    async def main():
        return await asyncio.gather(*(episode(i) for i in range(20)))

    results = asyncio.run(main())
    assert [r[0].split("\n")[2] for r in results] == [str(i) for i in range(20)]
    assert all(r[1] == 1.0 and r[2] == 1 for r in results)


def test_sync_step_works_inside_a_running_loop(qwen_tok, tool):
    async def main():
        env = make_env(qwen_tok, tool)
        env.reset(seed=0)
        return step_text(env, CALL)
    obs, *_ = asyncio.run(main())
    assert len(obs["tokens"]) > 0


@pytest.mark.parametrize("action,err", [
    ([1.5, 2.0], TypeError), ([[1, 2]], TypeError), ([-1], ValueError),
    ([10 ** 9], ValueError), ({"ids": [1]}, ValueError), (object(), TypeError),
])
def test_bad_actions_raise_clear_errors(qwen_tok, tool, action, err):
    env = make_env(qwen_tok, tool)
    env.reset(seed=0)
    with pytest.raises(err):
        env.step(action)


def test_logprob_count_must_match(qwen_tok, tool):
    env = make_env(qwen_tok, tool)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="logprob"):
        env.step({"tokens": [1, 2, 3], "logprobs": [0.0]})


def test_bad_constructor_arguments(qwen_tok, tool):
    with pytest.raises(ValueError, match="max_turns"):
        make_env(qwen_tok, tool, max_turns=0)
    with pytest.raises(TypeError, match="Tool"):
        AnswerEnv(tokenizer=qwen_tok, tools=["python"])
    with pytest.raises(TypeError, match="tokenizer"):
        AnswerEnv(tokenizer=42)
    with pytest.raises(ValueError, match="no tasks"):
        AnswerEnv(tokenizer=qwen_tok).reset()


def test_reset_picks_tasks_by_seed_index_or_value(qwen_tok, tool):
    env = AnswerEnv(tokenizer=qwen_tok, tasks=[f"q{i}" for i in range(50)], tools=[tool])
    ids = [env.reset(seed=s)[1]["task_id"] for s in (3, 3, 4)]
    assert ids[0] == ids[1]
    assert env.reset(options={"index": 7})[1]["task_id"] == "7"
    assert env.reset(options={"task": {"id": "x", "question": "hi"}})[1]["task_id"] == "x"
    with pytest.raises(IndexError):
        env.reset(options={"index": 50})


def test_registry_errors_list_valid_choices():
    with pytest.raises(gym.error.Error, match="tir/MathCode-v0"):
        tir_envs.make("tir/Nope-v0")
    with pytest.raises(TypeError, match="max_turns"):
        tir_envs.make("tir/MathCode-v0", max_turn=3)


def test_trajectory_jsonl_roundtrip_and_padding(qwen_tok, tool, tmp_path):
    env = make_env(qwen_tok, tool)
    trajs = []
    for seed in range(3):
        env.reset(seed=seed)
        step_text(env, CALL * (seed + 1))
        trajs.append(step_text(env, "7")[-1]["trajectory"])
    path = tmp_path / "t.jsonl"
    assert write_jsonl(trajs, path) == 3
    back = read_jsonl(path)
    assert [t.to_dict() for t in back] == [t.to_dict() for t in trajs]
    batch = to_padded(back, pad_id=qwen_tok.pad_token_id)
    lengths = [len(t.prompt_ids) + len(t.token_ids) for t in trajs]
    assert batch["input_ids"].shape == (3, max(lengths))
    assert batch["attention_mask"].sum(1).tolist() == lengths
    for row, t in enumerate(trajs):
        p = len(t.prompt_ids)
        assert batch["loss_mask"][row, :p].sum() == 0
        assert batch["loss_mask"][row].sum() == sum(t.loss_mask)
        assert np.isclose(batch["token_rewards"][row].sum(), t.reward)
    (tmp_path / "bad.jsonl").write_text('{"prompt_ids": [1]}\nnot json\n')
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        read_jsonl(tmp_path / "bad.jsonl")


def test_render_ansi_shows_segments(qwen_tok, tool):
    env = AnswerEnv(tokenizer=qwen_tok, tasks=["q"], tools=[tool], render_mode="ansi")
    env.reset(seed=0)
    step_text(env, CALL)
    out = env.render()
    assert "[prompt]" in out and "[action]" in out and "[observation]" in out


def test_status_of_error_results(qwen_tok):
    env = make_env(qwen_tok, EchoTool(reply="boom", status=Status.TIMEOUT))
    env.reset(seed=0)
    assert step_text(env, CALL)[-1]["turn"].status == "timeout"


def test_chat_glue_observations_are_env_tokens(qwen_tok, tool):
    env = AnswerEnv(tokenizer=qwen_tok, tasks=["q"], tools=[tool], tool_format=JsonFormat(),
                    observation_role="user")
    env.reset(seed=0)
    call = '<tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call>'
    obs, *_ = step_text(env, call)
    assert env.codec.decode(obs["tokens"]) == (
        "<|im_end|>\n<|im_start|>user\n<tool_response>\necho:1\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n")
    obs, *_ = step_text(env, call + "<|im_end|>")  # the policy closed its own turn
    text = env.codec.decode(obs["tokens"])
    assert text.startswith("\n<|im_start|>user\n") and text.count("<|im_end|>") == 1
    traj = env.trajectory
    im_end = qwen_tok.convert_tokens_to_ids("<|im_end|>")
    policy_im_end = [traj.loss_mask[i] for i, t in enumerate(traj.token_ids) if t == im_end]
    assert policy_im_end == [0, 0, 1, 0]  # glue, glue, the policy's own, glue


class SlowEchoEnv(AnswerEnv):
    """Every action calls the tool, whose latency differs run to run."""

    def __init__(self, **kw):
        super().__init__(tools=[EchoTool()], tasks=["q"], **kw)

    def is_final(self, action_text, calls):
        return False

    def _begin_turn(self, *args):
        from tir_envs.formats import ToolCall
        act = super()._begin_turn(*args)
        act.calls = [ToolCall("python", {"code": "x"})]
        return act


def test_check_env_passes_when_tools_really_run(qwen_tok):
    env = SlowEchoEnv(tokenizer=qwen_tok)
    check_env(env, skip_render_check=True)
    env.reset(seed=0)
    assert env.step([1])[-1]["turn"].tool_results[0]["latency_s"] > 0
