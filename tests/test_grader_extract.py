"""Answer extraction (last boxed answer of the policy's text) and the in-caller fast path."""

from __future__ import annotations

import pytest

from tir_envs.answers.math import extract_final_answer as extract_answer
from tir_envs.rewards.math.normalize import as_rational, light_normalize, quick_verdict


@pytest.mark.parametrize("text, expected", [
    ("The answer is \\boxed{42}.", "42"),
    ("first \\boxed{1}, then \\boxed{2}", "2"),
    ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
    ("\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}", "\\left( 3, \\frac{\\pi}{2} \\right)"),
    ("so \\fbox{x^{2}} is it", "x^{2}"),
    ("\\boxed {7}", "7"),
    ("$\\boxed 5$", "5"),
    ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),            # escaped braces do not close the box
    ("\\boxed{\\boxed{3}}", "3"),                       # a box in a box is unwrapped
    ("\\boxed{ 12 }", "12"),
    ("\\boxed{12} and an unfinished \\boxed{13", "12"),  # an unclosed box is not an answer
])
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize("text", [None, "", "no box here", "\\boxed{}", "\\boxed{   }",
                                  "\\boxed{unclosed"])
def test_no_answer_is_none(text):
    assert extract_answer(text) is None


def test_light_normalize_drops_only_presentation():
    assert light_normalize("$\\left( 1,\\ 2 \\right).$") == "(1,2)"
    assert light_normalize("1{,}000") == "1,000"
    assert light_normalize("\\dfrac{1}{2}") == "\\frac{1}{2}"


@pytest.mark.parametrize("text, value", [
    ("42", 42), ("-7", -7), ("1,000", 1000), ("12.00", 12), ("0.25", 0.25), ("3/4", 0.75),
    ("-\\frac{1}{2}", -0.5), ("\\frac{-3}{4}", -0.75), ("\\frac12", 0.5),
])
def test_as_rational(text, value):
    assert as_rational(light_normalize(text)) == value


@pytest.mark.parametrize("text", ["x=3", "\\sqrt{2}", "(1,2)", "1,2", "\\frac{1}{0}", "9" * 70])
def test_as_rational_declines(text):
    assert as_rational(light_normalize(text)) is None


@pytest.mark.parametrize("pred, gold, verdict", [
    ("18", "18", True), ("1,600", "1600", True), ("0.5", "\\frac{1}{2}", True),
    ("\\dfrac{3}{4}", "0.75", True), ("19", "18", False), ("0.34", "\\frac{1}{3}", False),
    ("0.3333333", "\\frac{1}{3}", None),   # close floats are Math-Verify's call (it rounds)
    ("x = 3", "3", None), ("(1,2)", "(2,1)", None),
])
def test_quick_verdict(pred, gold, verdict):
    assert quick_verdict(pred, gold) is verdict
