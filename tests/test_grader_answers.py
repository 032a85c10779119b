"""What the grader reads from a response: the boxes of the final answer (graded as a set only
against a list/set gold), the opt-in fallback for responses without a box, and the protocol's
``extraction`` switch."""

from __future__ import annotations

import pickle

import pytest

from tests.grader_pairs import FALLBACK_CASES
from tir_envs.answers.math import FinalAnswer, extract_final_answer, final_boxes
from tir_envs.protocols import math_protocol
from tir_envs.rewards.math import GraderPool, MathReward, last_boxed_answer
from tir_envs.rewards.math.extract import graded_text, is_multi_valued
from tir_envs.rewards.math.reward import gold_text
from tir_envs.task import Task
from tir_envs.trajectory import Trajectory


@pytest.fixture(scope="module")
def pool():
    with GraderPool(workers=1, timeout_s=30) as p:
        yield p


@pytest.mark.parametrize("text, boxes", [
    ("\\boxed{-2} \\quad\\text{and}\\quad \\boxed{1}", ["-2", "1"]),
    ("$\\boxed{-2}$ and $\\boxed{1}$.", ["-2", "1"]),
    ("$x = \\boxed{3}$, $y = \\boxed{4}$", ["3", "4"]),
    ("\\boxed{1},\\boxed{2},\\boxed{3}", ["1", "2", "3"]),
    ("\\boxed{1}\n\\boxed{2}", ["1", "2"]),
    ("a = \\boxed{3}. Then we show the rest, so b = \\boxed{4}", ["4"]),
    ("\\boxed{\\boxed{3}}", ["3"]),
    ("no box", []),
])
def test_final_boxes(text, boxes):
    assert final_boxes(text) == boxes


def test_final_answer_is_the_last_box_and_carries_the_group():
    answer = extract_final_answer("so $\\boxed{-2}$ and $\\boxed{1}$")
    assert isinstance(answer, FinalAnswer) and answer == "1"
    assert answer.boxes == ("-2", "1") and answer.source == "boxed"
    again = pickle.loads(pickle.dumps(answer))   # crosses process boundaries intact
    assert again == "1" and again.boxes == ("-2", "1")
    assert last_boxed_answer("so $\\boxed{-2}$ and $\\boxed{1}$") == "1"
    assert type(last_boxed_answer("\\boxed{1}")) is str


@pytest.mark.parametrize("gold, multi", [
    ("1,-2", True), ("3, 5, 7", True), ("\\{1, 2\\}", True), ("{1,2,3}", True),
    ("(2, 2), (6, 2)", True), ("1 \\pm \\sqrt{19}", True), ("x = 1, y = 2", True),
    ("32, 349", True),
    ("2", False), ("(1, 2)", False), ("[2, 5)", False), ("58,500", False), ("10,\\!080", False),
    ("\\$32,\\!348", False), ("\\frac{1}{2}", False), ("\\left( 3, \\frac{\\pi}{2} \\right)", False),
])
def test_is_multi_valued(gold, multi):
    assert is_multi_valued(gold) is multi


def test_graded_text_joins_boxes_only_for_a_list_gold():
    pred = extract_final_answer("\\boxed{1} and \\boxed{2}")
    assert graded_text(pred, "1, 2") == "1, 2"
    assert graded_text(pred, "2") == "2"
    assert graded_text("1", "1, 2") == "1"          # a plain string has one box
    assert graded_text(None, "1, 2") is None


@pytest.mark.parametrize("text, expected", FALLBACK_CASES)
def test_fallback_extraction(text, expected):
    found = extract_final_answer(text, fallback=True)
    assert (None if found is None else str(found)) == expected


def test_fallback_is_off_by_default_and_reports_its_source():
    assert extract_final_answer("The final answer is $9$.") is None
    assert extract_final_answer("The final answer is $9$.", fallback=True).source == \
        "final answer is"
    assert extract_final_answer("Thus $x = 9$.", fallback=True).source == "last math"
    both = extract_final_answer("Thus the roots are $1$ and $2$.", fallback=True)
    assert both.boxes == ("1", "2")


def _trajectory():
    return Trajectory(prompt_ids=[1], token_ids=[2], loss_mask=[1], token_rewards=[0.0],
                      logprobs=[0.0])


def test_math_reward_extraction_switch(pool):
    task = Task("t", "q", answer="9")
    unboxed = ["I ran the code. The final answer is $9$."]
    reward = MathReward(grader=pool)
    assert math_protocol("torl").grade(reward, task, unboxed, _trajectory()).value == 0.0
    evaluation = math_protocol("torl", extraction="fallback")
    assert evaluation.grade(reward, task, unboxed, _trajectory()).value == 1.0
    assert evaluation.grade(reward, task, ["\\boxed{8}. The final answer is $9$."],
                            _trajectory()).value == 0.0
    with pytest.raises(ValueError, match="extraction"):
        math_protocol("torl", extraction="lenient")


def test_math_reward_grades_several_boxes_as_a_set(pool):
    reward = MathReward(grader=pool)
    both = ["The integers are $\\boxed{-2}$ and $\\boxed{1}$."]

    def grade(task: Task, actions: list[str]):
        return math_protocol("torl").grade(reward, task, actions, _trajectory())

    assert grade(Task("t", "q", answer="1,-2"), both).value == 1.0
    assert grade(Task("t", "q", answer=["1", "-2"]), both).value == 1.0
    assert grade(Task("t", "q", answer="-2"), both).value == 0.0
    # issue 21: two different boxes against one value are a hedge (this asserted 1.0 before)
    assert grade(Task("t", "q", answer="1"), both).value == 0.0
    assert grade(Task("t", "q", answer="1,-2,3"), both).value == 0.0


def test_gold_text_of_a_list():
    assert gold_text(["1", -2]) == "1, -2"
    assert gold_text(70) == "70"


def test_hostile_responses_extract_without_recursion_or_blowup():
    # A policy controls this text: deep nesting must not recurse, unclosed boxes must not rescan.
    deep = "\\boxed{" * 3000 + "7" + "}" * 3000
    assert extract_final_answer(deep) == "7"
    assert last_boxed_answer("\\boxed{" * 5000) is None
    many = ("\\boxed{1} and " * 3000).rstrip(" and")
    assert extract_final_answer(many).boxes == ("1",) * 3000
    assert extract_final_answer("\\[ a " * 20000, fallback=True) is None


def test_fallback_never_reads_a_box_left_open():
    assert extract_final_answer("The final answer is \\boxed{\\frac{14}{3}", fallback=True) is None
    assert extract_final_answer("The final answer is \\boxed{7}.", fallback=True) == "7"
