"""Each seed paper's number, reproduced through the public API with the env's defaults (issue 33):
RITE's eq. 8, ZeroTIR's stop at the box and recipe, VerlTool's eq. 6 as its authors' code
applies it, ToRL's response budget, RITE's turn cap.  AutoTIR's eq. 5 is in
``tests/test_autotir_env.py``.  Real sandbox, real Qwen2.5 tokenizer, real grader."""

from __future__ import annotations

import numpy as np
import pytest

from tir_envs.task import Task
from tir_envs.envs.mathcode import MathCodeEnv
from tir_envs.protocols.zerotir import ZeroTIRProtocol
from tir_envs.rewards.math import GraderPool
from tir_envs.trainers.grpo.advantages import group_advantages
from tir_envs.trainers.grpo.config import CONFIG_DIR, GRPOConfig

TASK = Task("t/42", "What is $6 \\times 7$?", answer="42")
RITE_CALL = '<think>{}</think>\n<tool_call>\n{{"name": "{}", "arguments": {}}}\n</tool_call>'


@pytest.fixture(scope="module")
def grader():
    with GraderPool(workers=1, timeout_s=30) as pool:
        yield pool


def episode(env, actions):
    """Step each action; return the finished trajectory."""
    env.reset(options={"index": 0})
    info = {}
    for a in actions:
        *_, info = env.step(env.codec.encode(a))
    return info["trajectory"]


def make(qwen_tok, grader, protocol, **kw):
    return MathCodeEnv(protocol=protocol, tasks=[TASK], tokenizer=qwen_tok, grader=grader, **kw)


def rite_answer(value: str) -> str:
    return RITE_CALL.format("Done.", "answer", '{"answer": "\\\\boxed{' + value + '}"}')


# ---------------------------------------------------------------------------- RITE
def test_rite_eq8_outcome_is_plus_minus_one_by_default(qwen_tok, grader):
    env = make(qwen_tok, grader, "rite")
    call = RITE_CALL.format("Multiply.", "python", '{"code": "print(6 * 7)"}')
    wrong = episode(env, [call, rite_answer("41")])
    assert wrong.reward_components["format"] == 1.0  # a clean cycle ...
    assert wrong.reward == pytest.approx(0.0)       # ... with a wrong answer: -1 + 1 = 0
    right_slip = episode(env, [call, "I am sure now.\n" + rite_answer("42")])
    assert right_slip.reward_components["format"] == 0.0  # a minor format slip
    assert right_slip.reward == pytest.approx(1.0) and right_slip.reward > wrong.reward
    env.close()
    old = make(qwen_tok, grader, "rite", wrong_reward=0.0)  # the 1/0 reading, named
    assert episode(old, [call, rite_answer("41")]).reward == pytest.approx(1.0)
    old.close()


def test_rite_turn_cap_is_the_papers_200_within_the_context_budget(qwen_tok, grader):
    env = make(qwen_tok, grader, "rite")
    assert env.max_turns == 200 and env.max_total_tokens == 1024 + 8192
    call = RITE_CALL.format("Again.", "python", '{"code": "print(1)"}')
    traj = episode(env, [call] * 20 + [rite_answer("42")])  # past the old cap of 16
    assert traj.num_tool_calls == 20 and traj.correct and traj.stop_reason == "answered"
    env.close()


# ---------------------------------------------------------------------------- ZeroTIR
def test_zerotir_generation_stops_at_the_first_box(qwen_tok, grader):
    env = make(qwen_tok, grader, "zerotir")
    # the box ends the episode: the block opened after it is never run, the box is the answer
    traj = episode(env, ["So the answer is \\boxed{42}. Let me check.\n```python"])
    assert traj.terminated and traj.num_tool_calls == 0 and traj.answer == "42"
    assert traj.reward == 1.0
    traj = episode(env, ["First \\boxed{42}, or rather \\boxed{41}."])
    assert traj.answer == "42" and traj.correct  # graded where generation stopped
    # a box inside code is the tool's input, not an answer: the call runs
    traj = episode(env, ["```python", "\nprint('\\\\boxed{41}')\n```", "\\boxed{42}"])
    assert traj.num_tool_calls == 1 and traj.answer == "42"
    env.close()
    other = MathCodeEnv(protocol=ZeroTIRProtocol(stop_at_box=False), tasks=[TASK],
                        tokenizer=qwen_tok, grader=grader)
    traj = episode(other, ["First \\boxed{42}, or rather \\boxed{41}."])
    assert traj.answer == "41" and not traj.correct  # the run-on reading grades the last box
    other.close()


def _recipe(name: str) -> GRPOConfig:
    return GRPOConfig.load(CONFIG_DIR / f"{name}.yaml", ["model.path=/m", "data.path=/d.jsonl"])


def test_zerotir_recipe_is_the_papers():
    c = _recipe("zerotir_math")
    assert c.rollout.samples_per_task == 16
    assert c.algorithm.mini_batch_size is None  # one policy update per iteration
    assert c.algorithm.kl_coef > 0
    assert c.env.kwargs["stateful"] is False     # the one-shot executor
    assert c.rollout.vllm["max_model_len"] >= 1024 + 8192


# ---------------------------------------------------------------------------- VerlTool
def _verltool_env(qwen_tok, grader):
    return make(qwen_tok, grader, **{k: v for k, v in _recipe("verltool_math").env.kwargs.items()})


def test_verltool_eq6_charges_no_tool_and_invalid_actions(qwen_tok, grader):
    env = _verltool_env(qwen_tok, grader)
    code = "```python\nprint(6 * 7)\n```\n```output"
    assert episode(env, [code, "\\boxed{42}"]).reward == pytest.approx(1.0)
    assert episode(env, [code, "\\boxed{41}"]).reward == pytest.approx(-1.0)
    assert episode(env, ["\\boxed{42}"]).reward == pytest.approx(1.0 - 0.25)   # no tool
    assert episode(env, ["\\boxed{41}"]).reward == pytest.approx(-1.0 - 0.25)
    env.close()


def test_verltool_advantages_differ_from_torls_where_eq6_as_written_equals_them(qwen_tok,
                                                                                 grader):
    """Eq. 6 as written (-0.25 on every wrong answer) is an affine map of ToRL's ±1, so GRPO's
    advantages are ToRL's; the authors' reading (no tool / invalid action) is not."""
    code = "```python\nprint(6 * 7)\n```\n```output"
    group = [[code, "\\boxed{42}"], ["\\boxed{42}"], [code, "\\boxed{41}"], ["\\boxed{41}"]]
    torl = make(qwen_tok, grader, "torl")
    written = make(qwen_tok, grader, "torl", tool_penalty=-0.25)
    authors = _verltool_env(qwen_tok, grader)
    adv = {name: group_advantages([episode(e, g).reward for g in group], [0] * 4)
           for name, e in (("torl", torl), ("written", written), ("authors", authors))}
    assert np.allclose(adv["written"], adv["torl"], atol=1e-7)
    assert not np.allclose(adv["authors"], adv["torl"], atol=1e-3)
    assert adv["authors"][0] > adv["authors"][1]  # the tool-using right answer is preferred
    for env in (torl, written, authors):
        env.close()


def test_verltool_loss_is_a_per_trajectory_mean():
    assert _recipe("verltool_math").algorithm.aggregation == "seq_mean"


# ---------------------------------------------------------------------------- budgets
def test_torl_budgets_the_response_not_the_prompt(qwen_tok, grader):
    long_task = Task("t/long", "Compute " + "one plus " * 300 + "one.", answer="301")
    env = MathCodeEnv(protocol="torl", tasks=[long_task], tokenizer=qwen_tok, grader=grader)
    _, info = env.reset(options={"index": 0})
    prompt = len(env.trajectory.prompt_ids)
    assert prompt > 400 and env.max_response_tokens == 3072
    assert info["max_new_tokens"] == 3072  # a long prompt leaves the response its 3072 tokens
    env.close()
    total = MathCodeEnv(protocol="torl", tasks=[long_task], tokenizer=qwen_tok, grader=grader,
                        max_total_tokens=400 + 3072, max_response_tokens=False)
    _, info = total.reset(options={"index": 0})
    assert info["max_new_tokens"] == 400 + 3072 - prompt  # the prompt-counting reading
    total.close()
    with pytest.raises(ValueError, match="max_response_tokens"):
        MathCodeEnv(protocol="torl", tasks=[long_task], tokenizer=qwen_tok, max_response_tokens=0)
