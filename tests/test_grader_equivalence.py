"""Equivalence on real answers from the shipped benchmarks, rewritten into other but equal
forms (fractions/decimals, ``\\dfrac``, units and ``^\\circ``, ``\\text{}``, sets, intervals,
tuples, thousands separators, ``x = 3``), plus near-miss negatives."""

from __future__ import annotations

import pytest

from tests.grader_pairs import negative_pairs, positive_pairs
from tir_envs.protocols import math_protocol
from tir_envs.rewards.math import GraderPool, MathReward, is_equivalent
from tir_envs.task import Task
from tir_envs.trajectory import Trajectory, Turn

#: the ToRL protocol's reading of saved action texts (offline grading goes through it)
TORL = math_protocol("torl")


@pytest.fixture(scope="module")
def pool():
    with GraderPool(workers=2, timeout_s=30) as p:
        yield p


def _mismatches(pool, pairs):
    grades = pool.grade_many([(p, g) for _, p, g, _ in pairs])
    return [(rule, p, g, grade) for (rule, p, g, want), grade in zip(pairs, grades)
            if grade.correct is not want]


def test_at_least_100_real_positive_pairs_are_equivalent(pool):
    pairs = positive_pairs()
    assert len(pairs) >= 100
    assert len({rule for rule, *_ in pairs}) >= 20
    assert _mismatches(pool, pairs) == []


def test_near_misses_are_not_equivalent(pool):
    pairs = negative_pairs()
    assert len(pairs) >= 30
    assert _mismatches(pool, pairs) == []


def test_symbolic_pairs_use_math_verify_not_just_the_fast_path(pool):
    before = pool.stats["ok"]
    assert pool.grade("\\left( 3, \\frac{\\pi}{2} \\right)", "(3, \\pi/2)").correct
    assert pool.grade("x^2 + 2x + 1", "(x+1)^2").correct
    assert pool.stats["ok"] >= before + 2


def test_module_level_is_equivalent():
    assert is_equivalent("\\dfrac{1}{2}", "0.5")
    assert not is_equivalent(None, "0.5")
    assert not is_equivalent("  ", "0.5")


def _trajectory(statuses=(), truncated=False):
    traj = Trajectory(prompt_ids=[1], token_ids=[2, 3], loss_mask=[1, 1],
                      token_rewards=[0.0, 0.0], logprobs=[0.0, 0.0])
    for s in statuses:
        traj.turns.append(Turn(index=len(traj.turns), action_span=(0, 1),
                               tool_calls=[{"name": "python", "error": None}],
                               tool_results=[{"status": s}]))
    traj.truncated, traj.terminated = truncated, not truncated
    return traj


def test_math_reward_components(pool):
    task = Task("aime2025/0", "q", answer=70)  # AIME 2025 gold answers are ints
    reward = MathReward(correct_reward=1.0, wrong_reward=-1.0, exec_error_penalty=0.5,
                        grader=pool)

    def torl(task, trajectory, actions):
        return TORL.grade(reward, task, actions, trajectory)

    right = torl(task, _trajectory(["ok"]), ["I get \\boxed{70}."])
    assert right.value == 1.0 and right.components["correct"] == 1.0
    wrong = torl(task, _trajectory(["error", "ok"]), ["so \\boxed{71}"])
    assert wrong.value == -1.5 and wrong.components["exec_error_penalty"] == -0.5
    missing = torl(task, _trajectory(), ["no answer"])
    assert missing.components["has_answer"] == 0.0 and missing.value == -1.0


def test_answer_only_from_given_actions_and_override(pool):
    task = Task("t", "q", answer="5")
    reward = MathReward(grader=pool)
    # Only the policy's actions are searched; a bare number is not a boxed answer.
    assert TORL.grade(reward, task, ["```python\nprint(5)\n```", "5"],
                      _trajectory(["ok"])).value == 0.0
    assert reward.score(task, _trajectory(), "5").value == 1.0


def test_verltool_penalties(pool):
    task = Task("t", "q", answer="5")
    reward = MathReward(tool_penalties={"exec_error": 0.25, "no_tool": 0.25,
                                        "unfinished": 0.25, "invalid_action": 0.25}, grader=pool)
    result = TORL.grade(reward, task, ["\\boxed{5}"], _trajectory(truncated=True))
    assert result.components["no_tool_penalty"] == -0.25
    assert result.components["unfinished_penalty"] == -0.25
    assert result.components["exec_error_penalty"] == 0.0
    assert result.value == pytest.approx(0.5)
    with pytest.raises(ValueError, match="unknown tool_penalties"):
        MathReward(tool_penalties={"typo": 0.25})


def test_verltool_r_tool_costs_only_a_wrong_answer(pool):
    """VerlTool's math reward (eq. 6): R_acc = ±1 plus R_tool, 0 when correct, -0.25 otherwise."""
    task = Task("t", "q", answer="5")
    reward = MathReward(correct_reward=1.0, wrong_reward=-1.0, tool_penalty=-0.25, grader=pool)
    right = TORL.grade(reward, task, ["\\boxed{5}"], _trajectory(["ok"]))
    assert right.value == 1.0 and right.components["tool_penalty"] == 0.0
    wrong = TORL.grade(reward, task, ["\\boxed{6}"], _trajectory(["ok"]))
    assert wrong.value == -1.25 and wrong.components["tool_penalty"] == -0.25
    assert TORL.grade(reward, task, ["no answer"], _trajectory()).value == -1.25
    with pytest.raises(ValueError, match="tool_penalty .* must be <= 0"):
        MathReward(tool_penalty=0.25)
