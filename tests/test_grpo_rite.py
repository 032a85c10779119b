"""RITE's trainer options against hand-computed values: the token-level weights
w_t = α·IS_t + (1 − α)·𝟙[RS_t], the running per-prompt pass rate kept across epochs, and the
context budget schedule.  The loop-level behaviour is in test_grpo_trainer.py."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tir_envs.trajectory import Trajectory  # noqa: E402
from tir_envs.trainers.grpo.batch import build_batch  # noqa: E402
from tir_envs.trainers.grpo.config import GRPOConfig, context_budget  # noqa: E402
from tir_envs.trainers.grpo.filtering import AccuracyBand, Group, RunningPassRate  # noqa: E402
from tir_envs.trainers.grpo.loss import policy_loss  # noqa: E402
from tir_envs.trainers.grpo.token_weights import TokenWeights  # noqa: E402

PIECES = {0: "I", 1: " add", 2: " wait", 3: ",", 4: "<tool_call>", 5: '{"a": 1}',
          6: "</tool_call>", 7: "!!!", 8: " ok", 9: "<result>3</result>"}


class Pieces:
    """A tokenizer whose ids decode to fixed strings, so each token's text is known exactly."""

    def __init__(self, pieces: dict[int, str] = PIECES):
        self.pieces = pieces

    def decode(self, ids):
        return "".join(self.pieces[i] for i in ids)


def episode() -> Trajectory:
    t = Trajectory(prompt_ids=[8, 8], task_id="q")
    t.append([0, 1, 2, 3, 4, 5, 6], policy=True)   # "I add wait,<tool_call>{..}</tool_call>"
    t.append([9], policy=False)                     # the tool's result: not the policy's
    t.append([8, 7, 0, 1, 2], policy=True)          # " ok!!!I add wait"
    return t


def test_token_weights_match_the_hand_computed_values():
    rule = TokenWeights(alpha=0.8, repeat_ngram=2)
    important, rejected = rule.flags(episode(), Pieces())
    # " wait" is a thinking transition, the <tool_call> block a tool invocation
    assert important.tolist() == [0, 0, 1, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1]
    # "!!!" is stylistic; the second " add" and " wait" close bigrams seen before (I add, add
    # wait): repetition is counted over policy tokens only, across actions
    assert rejected.tolist() == [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1]
    w = rule.weights(episode(), Pieces())
    expected = [0.2, 0.2, 1.0, 0.2, 1.0, 1.0, 1.0, 0.0, 0.2, 0.0, 0.2, 0.0, 0.8]
    assert w.tolist() == pytest.approx(expected)
    assert rule.weights(episode(), Pieces())[7] == 0.0  # the observation token never trains


def test_token_weights_options_are_checked():
    assert TokenWeights.parse(None) is None and TokenWeights.parse("rite") == TokenWeights()
    assert TokenWeights.parse({"alpha": 0.5}).alpha == 0.5
    with pytest.raises(ValueError, match=r"unknown algorithm.token_weights key\(s\) \['alpa'\]"):
        TokenWeights.parse({"alpa": 0.5})
    with pytest.raises(ValueError, match=r"alpha must be in \[0, 1\]"):
        TokenWeights.parse({"alpha": 2})
    with pytest.raises(ValueError, match="bad regex"):
        TokenWeights.parse({"tool_patterns": ["("]})


def test_weights_scale_each_tokens_loss_and_land_on_the_episode_columns():
    batch = build_batch([Group("g", [episode(), episode()])], pad_id=0, scale="none",
                        weigh=lambda t: TokenWeights(repeat_ngram=2).weights(t, Pieces()))
    assert batch.token_weights.shape == batch.loss_mask.shape
    assert batch.token_weights[0, :2].tolist() == [0.0, 0.0]  # the prompt
    assert batch.token_weights[0, 4].item() == pytest.approx(1.0)  # " wait"
    # the loss at ratio 1: -Σ m·w·A / Σ m, by hand for one row of three tokens
    logp = torch.zeros(1, 3, requires_grad=True)
    mask, weights = torch.tensor([[1.0, 1.0, 0.0]]), torch.tensor([[0.2, 1.0, 1.0]])
    loss, _ = policy_loss(logp, torch.zeros(1, 3), torch.tensor([2.0]), mask, weights=weights)
    assert loss.item() == pytest.approx(-(0.2 * 2 + 1.0 * 2) / 2)
    loss.backward()
    assert logp.grad.tolist() == [[pytest.approx(-0.2), pytest.approx(-1.0), 0.0]]


def group(task: str, hits: list[bool]) -> Group:
    return Group(task, [Trajectory(task_id=task, correct=h, reward=float(h)) for h in hits])


def test_running_pass_rate_is_kept_across_epochs():
    rates = RunningPassRate()
    band = AccuracyBand(0.1, 0.9)
    assert rates.update(group("a", [True, False, False, False])) == 0.25       # 1/4
    assert rates.update(group("b", [True] * 4)) == 1.0
    # epoch 2: task a now solved by every sample.  Its group alone (1.0) would be dropped; its
    # running rate (1 + 4) / 8 keeps it in [0.1, 0.9]
    second = group("a", [True] * 4)
    assert not band.keep(second)
    assert rates.update(second) == pytest.approx(5 / 8) and band.contains(rates.rate("a"))
    assert rates.update(group("a", [False] * 8)) == pytest.approx(5 / 16)
    restored = RunningPassRate()
    restored.load_state_dict(rates.state_dict())
    assert restored.rate("a") == pytest.approx(5 / 16) and restored.rate("b") == 1.0
    assert restored.rate("never seen") is None


def test_excluded_samples_do_not_count_toward_the_pass_rate():
    g = group("a", [True, False, False])
    g.excluded = [None, "infra", None]
    assert RunningPassRate().update(g) == 0.5


def test_context_budget_schedule():
    schedule = {0: 16384, 150: 24576}
    assert [context_budget(schedule, s) for s in (0, 149, 150, 999)] == [16384] * 2 + [24576] * 2
    assert context_budget([[0, 8], [2, 16]], 3) == 16 and context_budget(None, 5) is None
    for bad in ({5: 100}, {0: 0}, {"x": 1}):
        with pytest.raises(ValueError, match="rollout.context_schedule"):
            GRPOConfig.load("toy", [f"rollout.context_schedule={bad}"])
    with pytest.raises(ValueError, match="algorithm.pass_rate must be group or running"):
        GRPOConfig.load("toy", ["algorithm.pass_rate=ema"])


def test_an_ellipsis_in_math_is_not_stylistic():
    """``1, 2, ..., n`` is mathematics, not style: only runs like ``!!!`` or ``===`` reject."""
    t = Trajectory(prompt_ids=[0])
    t.append([0, 1, 2], policy=True)
    _, rejected = TokenWeights(repeat_ngram=0).flags(t, Pieces({0: "1, 2, ...", 1: ", n",
                                                               2: "===="}))
    assert rejected.tolist() == [False, False, True]
