"""Answer forms of the new math suites (issue 33): AMC's whole-number floats, OlympiadBench's
multi-answer lists and units, TheoremQA's booleans, options and ordered lists; and how many
questions of each shipped set are text-only."""

from __future__ import annotations

import pytest

from tir_envs.data.math import load_math_tasks
from tir_envs.task import Task
from tir_envs.rewards.math import GraderPool
from tir_envs.rewards.math.forms import as_bool, as_option, list_items, strip_unit
from tir_envs.rewards.math.reward import MathReward


@pytest.fixture(scope="module")
def reward():
    with GraderPool(workers=1, timeout_s=30) as pool:
        yield MathReward(grader=pool)


def correct(reward, answer, gold, **meta):
    return reward.grade_task(answer, Task("t", "q", gold, meta)).correct


def test_amc_whole_floats_are_integers():
    tasks = load_math_tasks("amc23")
    assert len(tasks) == 40 and tasks[0].answer == "27" and tasks[0].meta["raw_answer"] == 27.0
    assert all("." not in t.answer for t in tasks)


def test_olympiadbench_multi_answers_are_lists(reward):
    tasks = {t.id: t for t in load_math_tasks("olympiadbench")}
    assert len(tasks) == 675 and not any("$" in t.answer for t in tasks.values())
    multi = [t for t in tasks.values() if t.meta["is_multiple_answer"]]
    assert len(multi) == 94 and "69, 84" in {t.answer for t in multi}
    assert correct(reward, "84, 69", "69, 84") and not correct(reward, "69", "69, 84")
    assert correct(reward, "(2,7,13), (1,8,19), (4,5,7)", "(1,8,19), (2,7,13), (4,5,7)")
    assert not correct(reward, "69, 84, 85", "69, 84")


@pytest.mark.parametrize("answer,gold,unit,expected", [
    ("45 \\text{ minutes}", "45", "minutes", True),
    ("45 minutes", "45", "minutes", True),
    ("45", "45", "minutes", True),
    ("46 minutes", "45", "minutes", False),
    ("90^\\circ", "90", "^{\\circ}", True),
    ("4.2\\%", "4.2", "%", True),
    ("166 cm^2", "166", "$cm^2$", True),
    ("\\frac{600}{7} \\text{ km/h}", "\\frac{600}{7}", "km/h", True),
])
def test_olympiadbench_units_are_not_part_of_the_answer(reward, answer, gold, unit, expected):
    assert correct(reward, answer, gold, unit=unit) is expected


def test_strip_unit_only_strips_a_trailing_unit():
    assert strip_unit("minutes", "minutes") == "minutes"  # nothing left: not a value and a unit
    assert strip_unit("5 minutes later", "minutes") == "5 minutes later"
    assert strip_unit("5", None) == "5"


def test_theoremqa_is_text_only_by_default_with_typed_answers():
    tasks = load_math_tasks("theoremqa")
    assert len(tasks) == 747 and not any(t.meta.get("picture") for t in tasks)
    assert len(load_math_tasks("theoremqa_all")) == 800  # 53 need a figure (not shipped)
    forms = {}
    for t in tasks:
        forms.setdefault(t.meta.get("answer_form"), []).append(t.answer)
    assert set(forms["bool"]) == {"True", "False"}
    assert all(a.startswith("(") and a.endswith(")") for a in forms["option"])
    assert all(a.startswith("[") and a.endswith("]") for a in forms["ordered_list"])


@pytest.mark.parametrize("answer,gold,form,expected", [
    ("True", "True", "bool", True), ("\\text{yes}", "True", "bool", True),
    ("false", "True", "bool", False), ("True or False", "True", "bool", False),
    ("(c)", "(c)", "option", True), ("C", "(c)", "option", True),
    ("\\text{(c)}", "(c)", "option", True), ("(a) or (c)", "(c)", "option", False),
    ("(b)", "(c)", "option", False),
    ("[0, 5]", "[0, 5]", "ordered_list", True), ("(0, 5)", "[0, 5]", "ordered_list", True),
    ("\\left[0, 5\\right]", "[0, 5]", "ordered_list", True),
    ("[5, 0]", "[0, 5]", "ordered_list", False),  # a vector, not a set
    ("[2, 1]", "[1, 0]", "ordered_list", False),  # SymPy: both empty intervals
    ("[1]", "[1, 1]", "ordered_list", False), ("[2.0, 1.32]", "[2, 1.32]", "ordered_list", True),
    ("0, 5", "[0, 5]", "ordered_list", False),
])
def test_theoremqa_forms(reward, answer, gold, form, expected):
    assert correct(reward, answer, gold, answer_form=form) is expected


def test_form_readers():
    assert as_bool("$\\text{True}$.") is True and as_bool("maybe") is None
    assert as_option("option (d)") == "d" and as_option("(a)(b)") is None
    assert list_items("[1, (2, 3)]") == ["1", "(2, 3)"] and list_items("1, 2") is None
