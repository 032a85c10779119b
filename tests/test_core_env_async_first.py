"""The env is async-first: the sync methods are final shims over the async twins, subclasses
customise through hooks, episode state lives in attributes set up in ``__init__``, and the
caller's protocol is never changed."""

from __future__ import annotations

import ast
import asyncio
import inspect

import gymnasium as gym
import pytest

from tests.core_helpers import AnswerEnv, EchoTool
from tir_envs.env import FINAL, TIREnv
from tir_envs.formats import get_format
from tir_envs.protocols.base import Protocol
from tir_envs.rewards.base import Reward, RewardResult
from tir_envs.sync_bridge import needs_loop
from tir_envs.tools.python.sandbox.interpreter import parse_source

CALL = "<python>print(1)</python>"


@pytest.mark.parametrize("name", FINAL)
def test_a_subclass_cannot_override_one_twin(name):
    with pytest.raises(TypeError, match=r"final.*on_reset"):
        type("Custom", (TIREnv,), {name: lambda self, *a, **k: None})


def test_on_reset_runs_on_every_path_and_can_refuse(qwen_tok):
    seen = []

    class Checked(AnswerEnv):
        def on_reset(self, task):
            seen.append(task.id)
            if task.id == "bad":
                raise ValueError("task 'bad' refused")

    env = Checked(tokenizer=qwen_tok, tools=[EchoTool()], tasks=["q"])
    env.reset(options={"task": {"id": "sync", "question": "q"}})
    asyncio.run(env.areset(options={"task": {"id": "async", "question": "q"}}))
    gym.Wrapper(env).reset(options={"task": {"id": "wrapped", "question": "q"}})
    assert seen == ["sync", "async", "wrapped"]
    with pytest.raises(ValueError, match="refused"):
        env.reset(options={"task": {"id": "bad", "question": "q"}})
    with pytest.raises(RuntimeError, match="reset"):  # no episode runs after a refused reset
        env.step("7")


def _self_attributes(func: ast.FunctionDef) -> set[str]:
    names = set()
    for node in ast.walk(func):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            for t in ast.walk(target):
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) \
                        and t.value.id == "self":
                    names.add(t.attr)
    return names


def test_no_attribute_of_tirenv_is_first_set_outside_init(qwen_tok):
    tree = parse_source(inspect.getsource(TIREnv))
    cls = tree.body[0]
    methods = {f.name: f for f in cls.body if isinstance(f, (ast.FunctionDef,
                                                             ast.AsyncFunctionDef))}
    in_init = _self_attributes(methods.pop("__init__"))
    elsewhere = set().union(*(_self_attributes(f) for f in methods.values()))
    assert elsewhere <= in_init, sorted(elsewhere - in_init)
    # and at run time: an episode with tool calls adds no attribute of its own
    env = AnswerEnv(tokenizer=qwen_tok, tools=[EchoTool()], tasks=["q"])
    before = set(vars(env))
    env.reset(seed=0)
    env.step(CALL)
    env.step("7")
    env.close()
    added = {a for a in set(vars(env)) - before if not hasattr(gym.Env, a)}
    assert not added, sorted(added)


def test_the_callers_protocol_object_is_never_changed(qwen_tok):
    protocol = Protocol(get_format("tags"), chat=True)
    env = AnswerEnv(tokenizer=qwen_tok, protocol=protocol, chat=False, tasks=["q"])
    assert protocol.chat is True and env.protocol.chat is False
    assert env.codec.decode(env.reset(seed=0)[0]["tokens"]) == "q"


def test_sync_and_async_paths_build_the_same_ledger(qwen_tok):
    def play_sync():
        env = AnswerEnv(tokenizer=qwen_tok, tools=[EchoTool()], tasks=["q"])
        env.reset(seed=0)
        env.step(CALL)
        return env.step("7")[-1]["trajectory"]

    async def play_async():
        env = AnswerEnv(tokenizer=qwen_tok, tools=[EchoTool()], tasks=["q"])
        await env.areset(seed=0)
        await env.astep(CALL)
        return (await env.astep("7"))[-1]["trajectory"]

    a, b = play_sync(), asyncio.run(play_async())
    assert (a.token_ids, a.loss_mask, a.turns, a.stop_reason) == \
        (b.token_ids, b.loss_mask, b.turns, b.stop_reason)


@pytest.mark.parametrize("action, reason, answered", [
    ("So the answer is $\\boxed{2}$.", "answered", True),
    ("I am not sure what the answer is.", "no_answer", False),   # prose, no answer format
    ("", "no_answer", False),                                     # an empty action
    ("Let me compute.\n```python\nprint(1 + 1)", "no_answer", False),  # unclosed code block
])
def test_the_stop_reason_says_whether_an_answer_was_given(qwen_tok, action, reason, answered):
    from tir_envs.envs.mathcode import MathCodeEnv

    env = MathCodeEnv(tokenizer=qwen_tok, tasks=[{"question": "1+1?", "answer": "2"}],
                      tool=EchoTool())
    env.reset(seed=0)
    *_, terminated, truncated, info = env.step(action + qwen_tok.eos_token)
    traj = info["trajectory"]
    assert terminated and not truncated
    assert traj.stop_reason == reason and traj.answered is answered


@pytest.mark.parametrize("name", ["outcome", "aoutcome"])
def test_the_outcome_hook_is_gone_and_says_what_replaced_it(name):
    with pytest.raises(TypeError, match=r"no longer calls.*reward="):
        type("Mine", (TIREnv,), {name: lambda self, *a: None})


class _AwaitedReward(Reward):
    """A reward that awaits I/O (a judge): the env awaits its ``ascore``, on every path."""

    def __init__(self):
        self.answers = []

    def score(self, task, trajectory, answer):
        raise AssertionError("an awaiting reward is scored through ascore")

    async def ascore(self, task, trajectory, answer):
        await needs_loop()  # a step driven loop-less hands over to a loop before any I/O
        await asyncio.sleep(0)
        self.answers.append(answer)
        return RewardResult(1.0, {"judged": 1.0}, correct=True, answered=True)


def test_the_env_awaits_the_rewards_ascore_with_the_protocols_one_answer(qwen_tok):
    reward = _AwaitedReward()
    env = AnswerEnv(tokenizer=qwen_tok, tasks=[{"question": "q", "answer": "7"}],
                    tools=[EchoTool()], reward=reward)
    env.reset()
    *_, info = env.step(env.codec.encode("it is 7"))
    traj = info["trajectory"]
    assert reward.answers == ["it is 7"] and traj.answer == "it is 7"
    assert traj.reward == 1.0 and traj.reward_components["judged"] == 1.0 and traj.correct
