"""The env's parts: one ``Episode`` per reset, one ``Budgets``, one ``RewardTerms``."""

import pytest

from tests.core_helpers import AnswerEnv, EchoTool
from tir_envs.env import TIREnv
from tir_envs.envs.mathcode import MathCodeEnv
from tir_envs.formats import get_format
from tir_envs.protocols import Budgets, Protocol
from tir_envs.rewards import RewardResult, RewardTerms, as_reward

CALL = "<python>print(1)</python>"


class FormatProtocol(Protocol):
    """The generic protocol plus a format term of its own (as RITE's)."""

    def __init__(self):
        super().__init__(get_format("tags"), chat=False)

    def extra_reward(self, state):
        return {"format": 0.5}, {"format_issues": ["one"]}


def env_with(tok, **kw):
    return AnswerEnv(tokenizer=tok, tasks=[{"question": "q", "answer": "7"}],
                     tools=[EchoTool()], **kw)


def play(env, *texts):
    env.reset(seed=0)
    for text in texts:
        out = env.step(env.codec.encode(text))
    return out


def test_budgets_merge_checks_and_reads_one_object():
    b = Budgets(max_turns=3, max_response_tokens=100).merged(max_turns=5, max_tool_seconds=2,
                                                              max_response_tokens=False)
    assert (b.max_turns, b.max_tool_seconds, b.max_response_tokens) == (5, 2.0, None)
    assert b.max_calls_per_turn == 16 and b.tokens_left(10, 5) == 8192 - 15
    assert Budgets(max_tool_calls={"python": 2}).tool_budget("python") == 2
    with pytest.raises(ValueError, match="max_turns must be a positive int"):
        Budgets().merged(max_turns=0)
    with pytest.raises(TypeError, match="unknown budget"):
        Budgets().merged(max_turn=3)
    with pytest.raises(ValueError, match="max_response_tokens"):
        Budgets().merged(max_response_tokens=-1)


def test_the_env_holds_one_budget_and_each_episode_keeps_its_own(qwen_tok):
    env = env_with(qwen_tok, max_turns=3, max_tool_seconds=9)
    assert env.budget.max_turns == 3 == env.max_turns and env.max_tool_seconds == 9.0
    env.reset(seed=0)
    started = env.episode.budget
    env.max_total_tokens = 4000  # between episodes, as the GRPO context schedule does
    assert env.budget.max_total_tokens == 4000 and env.episode.budget is started
    env.reset(seed=0)
    assert env.episode.budget.max_total_tokens == 4000
    with pytest.raises(ValueError, match="max_obs_tokens"):
        env.max_obs_tokens = 0


def test_each_reset_builds_an_episode_the_env_reads_through(qwen_tok):
    env = env_with(qwen_tok, max_turns=3)
    assert env.episode is None and env.trajectory is None and env._done
    env.reset(seed=0)
    first = env.episode
    assert env.task is first.task and env.trajectory is first.trajectory
    assert env.state is first.state and not env._done
    env.step(env.codec.encode(CALL))
    assert set(first.sessions) == {"python"} and first.tool_seconds > 0
    env.reset(seed=0)  # the cut episode's sessions are closed, a new episode begins
    assert first.sessions == {} and first.done and env.episode is not first
    assert env.tools["python"].closed == 1
    *_, info = env.step(env.codec.encode("7"))
    assert env.episode.done and info["trajectory"] is env.episode.trajectory
    assert env.episode.answer == "7" == info["trajectory"].answer


def test_the_reward_terms_weigh_outcome_and_format_terms(qwen_tok):
    env = env_with(qwen_tok, protocol=FormatProtocol(),
                   reward_weights={"outcome": 2.0, "format": 0.5})
    _, reward, terminated, _, info = play(env, "7")
    traj = info["trajectory"]
    assert terminated and reward == pytest.approx(2.0 + 0.25) == traj.reward
    assert traj.reward_components == {"correct": 1.0, "format": 0.5}
    assert traj.metadata["format_issues"] == ["one"]
    plain = env_with(qwen_tok, protocol=FormatProtocol(), reward_weights={"format": 0})
    _, reward, _, _, info = play(plain, "7")
    assert reward == 1.0 and "format" not in info["trajectory"].reward_components
    assert "format_issues" not in info["trajectory"].metadata


def test_the_turn_term_is_weighted_and_the_outcome_replaceable(qwen_tok):
    class Paid(AnswerEnv):
        def turn_reward(self, turn, results):
            return RewardResult(0.25, {"step": 0.25})

    env = Paid(tokenizer=qwen_tok, tasks=[{"question": "q", "answer": "7"}],
               tools=[EchoTool()], reward_weights={"turn": 2.0})
    _, reward, *_ = play(env, CALL)
    assert reward == 0.5 and env.trajectory.turns[0].reward_components == {"step": 0.25}
    env.reward = lambda task, trajectory, answer: RewardResult(-1.0)  # the outcome part only
    assert isinstance(env.reward_terms, RewardTerms) and env.reward_terms.outcome is env.reward
    *_, info = play(env, CALL, "7")
    assert info["trajectory"].reward == pytest.approx(0.5 - 1.0)


def test_bad_weights_and_the_old_hook_are_refused_with_the_fix(qwen_tok):
    with pytest.raises(ValueError, match="reward_weights has unknown term"):
        env_with(qwen_tok, reward_weights={"style": 1.0})
    with pytest.raises(TypeError, match="must be a number"):
        RewardTerms(as_reward(None), weights={"format": "high"})
    with pytest.raises(TypeError, match="reward_weights"):
        class Old(TIREnv):
            def extra_reward(self):
                return {}, {}


def test_mathcode_passes_the_base_keywords_through():
    env = MathCodeEnv(protocol="rite", format_reward=False, max_tool_seconds=5,
                      max_calls_per_turn=2, tasks=[{"question": "1+1", "answer": "2"}])
    try:
        assert env.reward_terms.weights["format"] == 0.0 and env.budget.max_tool_seconds == 5.0
        assert env.budget.max_calls_per_turn == 2
        with pytest.raises(ValueError, match="own protocol and tools"):
            MathCodeEnv(tools=[EchoTool()])
        with pytest.raises(TypeError, match="max_turn"):
            MathCodeEnv(max_turn=3)
    finally:
        env.close()
