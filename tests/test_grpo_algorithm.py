"""Group-relative advantages, void/infra masking, accuracy bands and refill, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from tir_envs.trajectory import Trajectory, Turn
from tir_envs.trainers.grpo.advantages import group_advantages
from tir_envs.trainers.grpo.filtering import (AccuracyBand, Group, exclusion_reason, fill_batch,
                                     is_correct, mark_exclusions)


def traj(reward=0.0, calls=0, answered=True, infra=False, correct=None,
         parse_errors=0) -> Trajectory:
    t = Trajectory(prompt_ids=[1], token_ids=[2, 3], loss_mask=[1, 1], logprobs=[0.0, 0.0],
                   token_rewards=[0.0, reward], reward=reward, infra_failed=infra,
                   correct=correct, answered=answered)
    ran = {"tool": "python", "status": "ok", "executed": True}
    botched = {"tool": None, "status": "error", "executed": False, "parse_error": True}
    t.turns = [Turn(0, (0, 2), tool_calls=[{"name": "python"}] * (calls + parse_errors),
                    tool_results=[ran] * calls + [botched] * parse_errors)]
    return t


# ---------------------------------------------------------------- advantages
def test_grpo_divides_by_group_std_and_dr_grpo_only_centres():
    r = [1.0, 0.0, 0.0, 1.0, 0.5, 0.5, 0.5]
    g = [0, 0, 0, 0, 1, 1, 1]
    grpo = group_advantages(r, g, scale="std")
    dr = group_advantages(r, g, scale="none")
    first = np.array([1.0, 0.0, 0.0, 1.0])
    std = first.std(ddof=1)  # 0.577...
    assert grpo[:4] == pytest.approx((first - 0.5) / (std + 1e-6))
    assert dr[:4] == pytest.approx(first - 0.5)
    assert list(grpo[4:]) == [0.0, 0.0, 0.0] and list(dr[4:]) == [0.0, 0.0, 0.0]


def test_invalid_members_neither_count_nor_get_advantage():
    r = [1.0, 0.0, 0.0, 123.0]
    adv = group_advantages(r, [0, 0, 0, 0], valid=[True, True, True, False], scale="none")
    assert adv == pytest.approx([2 / 3, -1 / 3, -1 / 3, 0.0])
    lone = group_advantages([1.0, 0.0], [0, 0], valid=[True, False])
    assert list(lone) == [0.0, 0.0]  # a group of one has no baseline


def test_advantage_arguments_are_checked():
    with pytest.raises(ValueError, match="scale"):
        group_advantages([1.0], [0], scale="mean")
    with pytest.raises(ValueError, match="group label"):
        group_advantages([1.0, 2.0], [0])
    with pytest.raises(ValueError, match="finite"):
        group_advantages([float("nan"), 1.0], [0, 0])


# ---------------------------------------------------------------- masking
def test_void_and_infra_trajectories_are_excluded():
    assert exclusion_reason(traj(calls=0, answered=False)) == "void"
    assert exclusion_reason(traj(calls=1, answered=False)) is None  # it used the tool
    assert exclusion_reason(traj(calls=0, answered=True)) is None
    assert exclusion_reason(traj(calls=2, infra=True)) == "infra"
    assert exclusion_reason(traj(calls=0, answered=False), mask_void=False) is None
    assert exclusion_reason(traj(infra=True), mask_infra=False) is None
    assert exclusion_reason(traj(calls=0, answered=None)) is None  # not reported: never void
    # a call the env could not parse ran nothing: still void
    assert exclusion_reason(traj(parse_errors=2, answered=False)) == "void"
    # the verdict is the typed field, never a component that happens to be named "correct"
    named = traj(reward=0.0, answered=False)
    named.reward_components = {"has_answer": 1.0, "correct": 1.0}
    assert exclusion_reason(named) == "void" and not is_correct(named)
    g = mark_exclusions(Group("k", [traj(), traj(answered=False), traj(infra=True)]))
    assert g.excluded == [None, "void", "infra"] and g.valid == [True, False, False]


def test_correctness_prefers_the_envs_verdict():
    assert is_correct(traj(reward=0.1, correct=True))  # e.g. a format bonus alone is not "correct"
    assert not is_correct(traj(reward=1.1, correct=False))
    assert is_correct(traj(reward=1.0)) and not is_correct(traj(reward=0.5))
    assert is_correct(traj(reward=0.5), threshold=0.5)


# ---------------------------------------------------------------- accuracy band
def group(correct: int, n: int = 10, excluded: int = 0) -> Group:
    ts = [traj(reward=1.0 if i < correct else 0.0) for i in range(n)]
    for t in ts[n - excluded:]:
        t.infra_failed = True
    return mark_exclusions(Group(f"{correct}/{n}", ts))


@pytest.mark.parametrize("preset, keep", [
    ("zerotir", [False, False, True, True, True, False, False]),
    ("rite", [False, True, True, True, True, True, False]),
    ("nonzero_var", [False, True, True, True, True, True, False]),
])
def test_band_presets(preset, keep):
    band = AccuracyBand.parse(preset)
    counts = [0, 1, 2, 5, 8, 9, 10]  # accuracies 0, .1, .2, .5, .8, .9, 1
    assert [band.keep(group(c)) for c in counts] == keep


def test_band_counts_only_valid_members():
    band = AccuracyBand(0.2, 0.8)
    # 2 right of 10 would pass; with the 2 wrong ones infra-failed... still 2/8 = .25: kept
    assert band.keep(group(2, excluded=2))
    # all members excluded: no accuracy, dropped
    assert not band.keep(group(0, n=3, excluded=3))


def test_band_parse_errors():
    assert AccuracyBand.parse(None) is None and AccuracyBand.parse("none") is None
    assert AccuracyBand.parse([0.1, 0.9]) == AccuracyBand(0.1, 0.9)
    with pytest.raises(ValueError, match="unknown accuracy band"):
        AccuracyBand.parse("dapo")
    with pytest.raises(ValueError, match="low <= high"):
        AccuracyBand.parse([0.9, 0.1])


# ---------------------------------------------------------------- refill
def test_refill_keeps_the_batch_full():
    stream = iter([0, 10, 5, 0, 5, 10, 5, 2, 5, 5] * 3)
    asked = []

    def sample(n):
        asked.append(n)
        return [group(next(stream)) for _ in range(n)]

    out = fill_batch(sample, need=4, keep=AccuracyBand.parse("zerotir").keep, max_rounds=5)
    assert len(out.groups) == 4
    assert all(0.2 <= AccuracyBand().accuracy(g) <= 0.8 for g in out.groups)
    assert asked == [4, 3, 1]  # each round asks for what is still missing
    assert out.rounds == 3 and len(out.sampled) == 8


def test_refill_gives_up_after_max_rounds_and_oversamples():
    asked = []

    def sample(n):
        asked.append(n)
        return [group(10) for _ in range(n)]  # always all-correct: never kept

    out = fill_batch(sample, need=4, keep=AccuracyBand.parse("zerotir").keep, max_rounds=2,
                     oversample=2.0)
    assert out.groups == [] and out.rounds == 2 and asked == [8, 8]
    plain = fill_batch(lambda n: [group(5) for _ in range(n)], need=3)
    assert len(plain.groups) == 3 and plain.rounds == 1


# ---------------------------------------------------------------- metrics
def test_tool_metrics_count_executed_calls_only():
    from tir_envs.trainers.grpo.metrics import rollout_metrics

    groups = [Group("g", [traj(calls=2), traj(parse_errors=3), traj(calls=1, parse_errors=1),
                          traj()])]
    m = rollout_metrics(groups)
    assert m["code_ratio"] == 0.5  # the episode with only botched calls ran no code
    assert m["tool_calls_per_episode"] == 0.75
    assert m["parse_errors_per_episode"] == 1.0
    assert m["tool_error_rate"] == 0.0  # a parse error is not a failed tool call
