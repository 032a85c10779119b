"""Issue 14's classes of answers, each a table of pairs graded end to end by a real pool:
code-style answers, the quick path never overruling the full check, several boxed answers,
decimals and integers, assignments and words (tables in ``tests.grader_pairs``)."""

from __future__ import annotations

import pytest

from tests.grader_pairs import CLASS_CASES
from tir_envs.answers.math import extract_final_answer
from tir_envs.rewards.math import GraderPool


@pytest.fixture(scope="module")
def pool():
    with GraderPool(workers=2, timeout_s=30) as p:
        yield p


def _pred(cls: str, pred: str):
    # The multi-box class holds whole responses: the answer is what extraction finds in them.
    return extract_final_answer(pred) if cls == "multiple boxes" else pred


@pytest.mark.parametrize("cls", sorted(CLASS_CASES))
def test_every_case_of_the_class_grades_as_expected(pool, cls):
    cases = CLASS_CASES[cls]
    assert len(cases) >= 10
    assert any(want for _, _, want, _ in cases) and not all(want for _, _, want, _ in cases)
    grades = pool.grade_many([(_pred(cls, p), g) for p, g, _, _ in cases])
    wrong = [(p, g, want, note, grade.status) for (p, g, want, note), grade in zip(cases, grades)
             if grade.correct is not want]
    assert wrong == []


def test_published_math_verify_expectations_are_cited():
    cited = [c for cases in CLASS_CASES.values() for c in cases if c[3].startswith("MV")]
    assert len(cited) >= 15
