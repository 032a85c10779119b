"""tir/MathCode-v0 end to end: one episode per recipe with the real local sandbox and the real
Qwen2.5 tokenizer, checking the exact token ledger (which tokens are masked, where rewards land),
plus budgets, statelessness, defaults, Gymnasium conformance and bad input."""

from __future__ import annotations

import asyncio

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import tir_envs
from tir_envs.env import EXHAUSTED_NOTICE
from tir_envs.envs.mathcode import MathCodeEnv
from tir_envs.protocols.rite import system_prompt
from tir_envs.protocols.torl import TORL_EMPTY_OUTPUT, TORL_TEMPLATE
from tir_envs.protocols.zerotir import TOO_LONG_NOTICE, ZEROTIR_TEMPLATE
from tir_envs.rewards.math import GraderPool
from tir_envs.task import Task

TASK = Task("t/42", "What is $6 \\times 7$?", answer="42")


@pytest.fixture(scope="module")
def grader():
    with GraderPool(workers=1, timeout_s=30) as pool:
        yield pool


def make(recipe, qwen_tok, grader, **kw):
    return MathCodeEnv(protocol=recipe, tasks=[TASK], tokenizer=qwen_tok, grader=grader, **kw)


def enc(tok, text):
    return tok.encode(text, add_special_tokens=False)


def play(env, actions):
    """Step each action (as token ids); return the observations' ids and the last step."""
    env.reset(options={"index": 0})
    observations, last = [], None
    for a in actions:
        last = env.step(enc(env.tokenizer, a))
        observations.append(last[0]["tokens"].tolist())
    return observations, last


def check_ledger(traj, pieces, final_reward):
    """``pieces``: (ids, is_policy) in order.  The ledger must be exactly these ids, masked 1 on
    policy pieces only, with ``final_reward`` on the last policy token and 0 elsewhere."""
    ids = [i for p, _ in pieces for i in p]
    mask = [int(pol) for p, pol in pieces for _ in p]
    assert traj.token_ids == ids
    assert traj.loss_mask == mask
    last_policy = max(i for i, m in enumerate(mask) if m)
    expected = [0.0] * len(ids)
    expected[last_policy] = final_reward
    assert traj.token_rewards == expected
    assert traj.reward == final_reward


# ---------------------------------------------------------------------------- one per recipe
def test_torl_episode_exact_ledger(qwen_tok, grader):
    env = make("torl", qwen_tok, grader)
    obs, info = env.reset(options={"index": 0})
    assert obs["tokens"].tolist() == enc(qwen_tok, TORL_TEMPLATE.format(question=TASK.question))
    assert env.stop_sequences == ["```output"]
    a1 = "Let me compute.\n```python\nx = 6 * 7\nprint(x)\n```\n```output"
    a2 = "The product is $\\boxed{42}$."
    (o1, o2), (_, reward, term, trunc, info) = play(env, [a1, a2])
    assert o1 == enc(qwen_tok, "\n42\n```\n") and o2 == []
    assert env.stop_sequences == []  # C = 1 call spent: no more stopping at ```output
    assert (reward, term, trunc) == (1.0, True, False)
    traj = info["trajectory"]
    check_ledger(traj, [(enc(qwen_tok, a1), True), (o1, False), (enc(qwen_tok, a2), True)], 1.0)
    t1, t2 = traj.turns
    assert t1.tool_calls[0]["arguments"] == {"code": "x = 6 * 7\nprint(x)"}
    assert t1.tool_results[0]["status"] == "ok" and t2.status == "no_call"
    assert traj.reward_components == {"correct": 1.0, "has_answer": 1.0, "outcome": 1.0}
    assert traj.metadata["answer"] == "42" and traj.stop_reason == "answered"
    env.close()


def test_zerotir_episode_exact_ledger(qwen_tok, grader):
    env = make("zerotir", qwen_tok, grader)
    obs, _ = env.reset(options={"index": 0})
    prompt = ZEROTIR_TEMPLATE.format(question=TASK.question)
    assert obs["tokens"].tolist() == enc(qwen_tok, prompt) and prompt.endswith("<think>")
    actions = [" Compute it.\n```python", "\nx = 6 * 7\nprint(y)\n```",
               " Typo; x is still defined.\n```python", "\nprint(x)\n```",
               " So 42.</think> <answer>\\boxed{42}</answer>"]
    stops = []
    env.reset(options={"index": 0})
    observations = []
    for a in actions:
        stops.append(env.stop_sequences)
        obs, reward, term, trunc, info = env.step(enc(qwen_tok, a))
        observations.append(obs["tokens"].tolist())
    assert stops == [["```python"], ["```"], ["```python"], ["```"], ["```python"]]
    o_pause1, o_err, o_pause2, o_ok, o_end = observations
    assert o_pause1 == o_pause2 == o_end == []  # a pause at an opening fence inserts nothing
    err_text = qwen_tok.decode(o_err)
    assert err_text.startswith("\n```output\nTraceback (most recent call last):")
    assert err_text.endswith("NameError: name 'y' is not defined\n```\n\n\n")
    assert o_ok == enc(qwen_tok, "\n```output\n42\n```\n\n\n")  # stateful: x survived
    assert (reward, term, trunc) == (1.0, True, False)
    traj = info["trajectory"]
    ids = [enc(qwen_tok, a) for a in actions]
    check_ledger(traj, [(ids[0], True), (ids[1], True), (o_err, False), (ids[2], True),
                        (ids[3], True), (o_ok, False), (ids[4], True)], 1.0)
    assert [t.status for t in traj.turns] == ["no_call", "tool_error", "no_call", "ok",
                                              "no_call"]
    assert traj.turns[3].tool_calls[0]["arguments"] == {"code": "print(x)"}
    env.close()


def test_rite_episode_exact_ledger(qwen_tok, grader):
    env = make("rite", qwen_tok, grader)
    obs, _ = env.reset(options={"index": 0})
    prompt = qwen_tok.apply_chat_template(
        [{"role": "system", "content": system_prompt(True)},
         {"role": "user", "content": TASK.question}], tokenize=False, add_generation_prompt=True)
    assert obs["tokens"].tolist() == enc(qwen_tok, prompt)
    assert env.stop_sequences == ["</tool_call>"]
    call = '<tool_call>\n{"name": "python", "arguments": {"code": "x = 6 * 7\\nprint(x)"}}\n' \
           '</tool_call>'
    answer = '<tool_call>\n{"name": "answer", "arguments": {"answer": "\\\\boxed{42}"}}\n' \
             '</tool_call>'
    a1, a2 = f"<think>Multiply with Python.</think>\n{call}", f"<think>It is 42.</think>\n{answer}"
    (o1, o2), (_, reward, term, trunc, info) = play(env, [a1, a2])
    glue = "<|im_end|>\n<|im_start|>tool\n42<|im_end|>\n<|im_start|>assistant\n"
    assert o1 == enc(qwen_tok, glue) and o2 == []
    assert (reward, term, trunc) == (2.0, True, False)  # correct 1 + format 1
    traj = info["trajectory"]
    check_ledger(traj, [(enc(qwen_tok, a1), True), (o1, False), (enc(qwen_tok, a2), True)], 2.0)
    assert traj.reward_components == {"correct": 1.0, "has_answer": 1.0, "outcome": 1.0,
                                      "format": 1.0}
    # The chat-template tokens are single special tokens, and they are env tokens.
    im_end, im_start = qwen_tok.convert_tokens_to_ids(["<|im_end|>", "<|im_start|>"])
    span = traj.turns[0].observation_span
    assert traj.token_ids[span[0]] == im_end and im_start in traj.token_ids[span[0]:span[1]]
    env.close()


# ---------------------------------------------------------------------------- protocol details
def test_torl_c_calls_then_later_code_is_ignored(qwen_tok, grader):
    env = make("torl", qwen_tok, grader, max_tool_calls=2)
    assert env.max_turns == 3
    block = "```python\nprint({})\n```\n```output"
    (o1, o2, o3), (_, reward, term, _, info) = play(
        env, [block.format(1), block.format(2), block.format(3)])
    assert o1 == enc(qwen_tok, "\n1\n```\n") and o2 == enc(qwen_tok, "\n2\n```\n")
    assert o3 == [] and term and reward == -1.0  # the third block is not run; no answer
    assert info["trajectory"].num_tool_calls == 2


def test_torl_output_rules_and_exec_penalty(qwen_tok, grader):
    env = make("torl", qwen_tok, grader, exec_error_penalty=0.5)
    (o1, _), (_, reward, _, _, info) = play(
        env, ["```python\n1 / 0\n```\n```output", "\\boxed{42}"])
    assert qwen_tok.decode(o1) == "\nZeroDivisionError: division by zero\n```\n"  # last line
    assert reward == 0.5 and info["trajectory"].reward_components["exec_error_penalty"] == -0.5
    (o1, _), _ = play(env, ["```python\nx = 1\n```\n```output", "\\boxed{1}"])
    assert qwen_tok.decode(o1) == f"\n{TORL_EMPTY_OUTPUT}\n```\n"  # ToRL's empty-output text
    (o1, _), _ = play(env, ["```python\nprint('a' * 600)\n```\n```output", "\\boxed{1}"])
    assert qwen_tok.decode(o1) == "\n" + "a" * 128 + "..." + "a" * 128 + "\n```\n"


def test_zerotir_exhaustion_notice_and_long_output(qwen_tok, grader):
    env = make("zerotir", qwen_tok, grader, max_tool_calls=1)
    actions = ["```python", "\nprint('x' * 5000)\n```", "\n```python", "\nprint(1)\n```",
               "\\boxed{42}"]
    observations, (_, reward, term, _, info) = play(env, actions)
    assert qwen_tok.decode(observations[1]) == f"\n```output\n{TOO_LONG_NOTICE}\n```\n\n\n"
    assert qwen_tok.decode(observations[3]) == f"\n```output\n{EXHAUSTED_NOTICE}\n```\n\n\n"
    assert term and reward == 1.0
    traj = info["trajectory"]
    # the refused call is recorded but not counted: num_tool_calls counts executed calls
    assert traj.turns[3].tool_results[0]["exhausted"] and traj.num_tool_calls == 1


def test_stateless_option_forgets_between_calls(qwen_tok, grader):
    env = make("zerotir", qwen_tok, grader, stateful=False)
    observations, _ = play(env, ["```python", "\nx = 41\nprint(x)\n```", "\n```python",
                                 "\nprint(x + 1)\n```", "\\boxed{42}"])
    assert "NameError: name 'x' is not defined" in qwen_tok.decode(observations[3])


def test_answer_printed_by_the_tool_does_not_count(qwen_tok, grader):
    env = make("torl", qwen_tok, grader)
    code = "```python\nprint('\\\\boxed{' + str(6 * 7) + '}')\n```\n```output"
    (o1, _), (_, reward, _, _, info) = play(env, [code, "Done."])
    assert "\\boxed{42}" in qwen_tok.decode(o1)  # the sandbox printed it ...
    assert reward == -1.0  # ... but the policy never wrote it
    assert info["trajectory"].metadata["answer"] != "42"


def test_rite_botched_call_is_an_observation(qwen_tok, grader):
    env = make("rite", qwen_tok, grader)
    bad = "<think>go</think>\n<tool_call>\n{\"name\": \"python\", \"arguments\": {code}}\n</tool_call>"
    (o1, _), (_, reward, term, _, info) = play(env, [bad, "<think>hm</think> \\boxed{42}"])
    assert "invalid JSON" in qwen_tok.decode(o1)
    assert term and reward == 0.0  # correct (1) + broken cycle (-1)
    assert info["trajectory"].reward_components["format"] == -1.0


# ---------------------------------------------------------------------------- defaults, gym
def test_defaults_and_registry():
    env = gym.make("tir/MathCode-v0")
    obs, info = env.reset(seed=3)
    inner = env.unwrapped
    assert isinstance(inner, MathCodeEnv) and inner.protocol.name == "torl"
    assert len(inner.tasks) == 500 and inner.stateful
    assert len(inner.tokenizer) == 151665  # the bundled Qwen2.5 tokenizer
    assert inner.codec.decode(obs["tokens"]).startswith("A conversation between User")
    env.close()
    with pytest.raises(TypeError, match="unknown argument.*recipes"):
        tir_envs.make("tir/MathCode-v0", recipes="torl")


def test_check_env_passes(qwen_tok, grader):
    for recipe in ("torl", "zerotir", "rite"):
        env = make(recipe, qwen_tok, grader)
        check_env(env, skip_render_check=True)
        env.close()


def test_async_episode(qwen_tok, grader):
    env = make("torl", qwen_tok, grader)

    async def run():
        await env.areset(options={"index": 0})
        await env.astep(enc(qwen_tok, "```python\nprint(6 * 7)\n```\n```output"))
        return await env.astep({"tokens": np.array(enc(qwen_tok, "\\boxed{42}")),
                                "logprobs": [-0.5] * len(enc(qwen_tok, "\\boxed{42}"))})

    _, reward, term, _, info = asyncio.run(run())
    assert term and reward == 1.0 and info["trajectory"].logprobs[-1] == -0.5


@pytest.mark.parametrize("kwargs, error, match", [
    ({"protocol": "tora"}, ValueError, "unknown math protocol"),
    ({"max_tool_calls": 0}, ValueError, "max_tool_calls must be a positive int"),
    ({"max_turns": -1}, ValueError, "max_turns must be a positive int"),
    ({"tool": object()}, TypeError, "tool must be a Tool named 'python'"),
    ({"tasks": "math5000"}, ValueError, "unknown math dataset"),
])
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        MathCodeEnv(**kwargs)
