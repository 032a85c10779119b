"""Properties of the token ledger on the real Qwen2.5 vocabulary."""

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.core_helpers import AnswerEnv, EchoTool
from tir_envs.trajectory import Trajectory

SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
PIECES = st.sampled_from(["<python>", "</python>", "\n", "print(1)", "x", "<result>", " ",
                          "答案", "\\boxed{7}", "<|im_end|>", "```"])
ACTION_TEXT = st.lists(st.one_of(PIECES, TEXT), min_size=1, max_size=8).map("".join)


def run_episode(env, actions):
    """Step through ``actions`` (token id lists); return per-step observation ids."""
    env.reset(seed=0)
    observations = []
    for ids in actions:
        obs, _, terminated, truncated, _ = env.step(ids)
        observations.append(obs["tokens"].tolist())
        if terminated or truncated:
            break
    return observations


@SETTINGS
@given(st.lists(ACTION_TEXT, min_size=1, max_size=4), TEXT)
def test_segments_masks_and_policy_ids(qwen_tok, texts, tool_output):
    env = AnswerEnv(tokenizer=qwen_tok, tasks=[{"question": "q?", "answer": "7"}],
                    tools=[EchoTool(reply=tool_output)], max_turns=4)
    # force a tool call into every action but the last so observations interleave
    actions_text = [t + "<python>c</python>" for t in texts[:-1]] + [texts[-1]]
    actions = [env.codec.encode(t) for t in actions_text]
    observations = run_episode(env, actions)
    traj: Trajectory = env.trajectory

    # policy ids are stored unchanged, observation ids exactly as returned, in order
    expected, mask = [], []
    for i, ids in enumerate(actions[:len(traj.turns)]):
        expected += ids
        mask += [1] * len(ids)
        if i < len(observations):
            expected += observations[i]
            mask += [0] * len(observations[i])
    assert traj.token_ids == expected
    assert traj.loss_mask == mask
    for turn, ids in zip(traj.turns, actions):
        a, b = turn.action_span
        assert traj.token_ids[a:b] == ids

    # decoded segments concatenate to the episode text
    segments = traj.segments(qwen_tok)
    whole = qwen_tok.decode(traj.prompt_ids + traj.token_ids, skip_special_tokens=False)
    assert "".join(t for _, t in segments) == whole
    assert [k for k, _ in segments][0] == "prompt"
    assert len(traj.token_rewards) == len(traj.token_ids) == len(traj.logprobs)


@SETTINGS
@given(st.lists(st.lists(st.integers(0, 151664), max_size=20), min_size=1, max_size=4))
def test_arbitrary_token_actions_are_stored_verbatim(qwen_tok, actions):
    env = AnswerEnv(tokenizer=qwen_tok, tasks=["q"], tools=[EchoTool()], max_turns=4)
    run_episode(env, actions)
    traj = env.trajectory
    for turn, ids in zip(traj.turns, actions):
        a, b = turn.action_span
        assert traj.token_ids[a:b] == ids
        assert all(traj.loss_mask[a:b])
        o, p = turn.observation_span
        assert not any(traj.loss_mask[o:p])
    assert sum(traj.loss_mask) == sum(len(a) for a in actions[:len(traj.turns)])


def test_boundary_tokens_are_not_merged_across_action_and_observation(qwen_tok):
    """'</python>' from the policy then '\\n<result>' from the env: a fresh encode of the
    joined text would merge '>\\n' differently; the ledger keeps both sides as produced."""
    env = AnswerEnv(tokenizer=qwen_tok, tasks=["q"], tools=[EchoTool(reply="84")])
    env.reset(seed=0)
    action = env.codec.encode("<python>\nprint(12*7)\n</python>")
    obs, *_ = env.step(action)
    obs_ids = obs["tokens"].tolist()
    assert obs_ids == env.codec.encode("\n<result>\n84\n</result>\n")
    stored = env.trajectory.token_ids
    assert stored == action + obs_ids
    fresh = env.codec.encode(env.codec.decode(stored))
    assert fresh != stored  # retokenizing would have drifted: the reason for token-in/out


def test_string_action_is_flagged_with_drift(qwen_tok):
    env = AnswerEnv(tokenizer=qwen_tok, tasks=["q"], tools=[EchoTool(reply="84")])
    env.reset(seed=0)
    env.step(env.codec.encode("<python>\nprint(12*7)\n</python>"))
    assert not env.trajectory.retokenized
    # the previous observation ends in '\n'; a text action starting with '\n' merges with it
    _, _, term, _, info = env.step("\n\nThe answer is 84.")
    traj = info["trajectory"]
    assert term and traj.retokenized and traj.drift > 0
    env.reset(seed=0)
    env.step("plain answer")
    assert env.trajectory.retokenized and env.trajectory.drift == 0


def test_logprobs_and_rewards_land_on_policy_tokens(qwen_tok):
    env = AnswerEnv(tokenizer=qwen_tok, tasks=[{"question": "q", "answer": "7"}],
                    tools=[EchoTool(reply="7")])
    env.reset(seed=0)
    a1 = env.codec.encode("<python>print(7)</python>")
    env.step({"tokens": a1, "logprobs": [-0.5] * len(a1)})
    a2 = env.codec.encode("It is 7")
    _, reward, term, _, info = env.step({"tokens": np.array(a2), "logprobs": [-0.25] * len(a2)})
    traj = info["trajectory"]
    assert term and reward == 1.0 and traj.reward == 1.0
    assert traj.has_logprobs
    nonzero = [i for i, r in enumerate(traj.token_rewards) if r]
    assert nonzero == [len(traj.token_ids) - 1]
    lp = np.array(traj.logprobs)
    mask = np.array(traj.loss_mask, dtype=bool)
    assert set(lp[mask]) == {-0.5, -0.25} and not lp[~mask].any()
