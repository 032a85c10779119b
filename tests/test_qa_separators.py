"""Issue 29, item 4 for QA: a candidate list scores as its worst candidate for every separator,
not a listed few, and on comparison questions an answer naming both options scores as the
wrong one, even joined by a plain space.  Properties over the shipped data."""

from __future__ import annotations

import functools
import random
import unicodedata

import pytest
from hypothesis import given, settings, strategies as st

from tir_envs.data.qa import QA_SETS, load_qa
from tir_envs.task import Task
from tir_envs.protocols.autotir import AutoTIRProtocol
from tir_envs.protocols.search_r1 import SearchR1Protocol
from tir_envs.rewards.autotir import AutoTIRReward
from tir_envs.rewards.qa import QAReward, exact_match, f1, rivals
from tir_envs.trajectory import Trajectory

LISTED = [" vs ", " vs. ", " versus ", " v. ", " → ", " -> ", " => ", " + ", "\t", "\u2028",
          "\u2029", " — ", " – ", " - ", "、", "，", " · ", " • ", "  ", " nor ", " plus ",
          " ｜ ", " (", "\u00a0", "\u3000", " » ", " :: ", " ~ ", " * ", " # ", "\r\n", " ↔ ",
          " rather than ", " as well as ", "\u2028or\u2028", " => maybe "]


@functools.lru_cache(maxsize=1)
def _pairs() -> list[tuple[Task, str]]:
    """(task, a wrong answer) pairs from the shipped sets: another task's gold sharing no
    token with any of this task's golds."""
    tasks = [t for name in sorted(QA_SETS) for t in load_qa(name)]
    rng = random.Random(1)
    out = []
    for task in rng.sample(tasks, 600):
        wrong = rng.choice(tasks).answer[0]
        if f1(wrong, task.answer) == 0 and not exact_match(task.answer[0], [wrong]):
            out.append((task, wrong))
    return out[:150]


def _paid(join: str) -> list[tuple[str, str]]:
    paid = []
    for task, wrong in _pairs():
        if any(join.strip() and join.strip() in g for g in task.answer):
            continue  # the golds use this separator: compared whole, as the gold says
        for a, b in ((task.answer[0], wrong), (wrong, task.answer[0])):
            hedge = a + join + b
            for metric in (f1, exact_match):
                if metric(hedge, task.answer, task.question) > \
                        metric(wrong, task.answer, task.question):
                    paid.append((task.id, hedge))
    return paid


@pytest.mark.parametrize("join", LISTED)
def test_listed_separators_never_pay(join):
    assert _paid(join) == []


def _separator_chars():
    """Any character that is not a letter, digit, mark or in-name punctuation."""
    def ok(ch: str) -> bool:
        cat = unicodedata.category(ch)
        return not (ch.isalnum() or cat.startswith("M") or cat == "Cs") and \
            ch not in "'’‘`´.,-&/ "
    return st.characters(max_codepoint=0x2FFFF).filter(ok)


@settings(max_examples=120, deadline=None)
@given(ch=_separator_chars(), spaced=st.booleans())
def test_any_separating_character_never_pays(ch, spaced):
    """Property: whatever character (punctuation, symbol, any whitespace, control, ...) joins
    the gold and a wrong answer, the pair earns no more than the wrong answer alone."""
    assert _paid(f" {ch} " if spaced else ch) == []


@functools.lru_cache(maxsize=1)
def _comparisons() -> list[tuple[Task, str]]:
    out = []
    for task in load_qa("hotpotqa"):  # its "type" labels are not reliable: every question
        for rival in rivals(task.question, task.answer):
            out.append((task, rival))
    return out


def test_comparison_questions_find_their_other_option():
    found = _comparisons()
    assert len({t.id for t, _ in found}) >= 600
    task, rival = next((t, r) for t, r in found if t.question.startswith("Who is older, Annie"))
    assert rival == "Annie Morton" and task.answer == ["Terry Richardson"]


@pytest.mark.parametrize("join", [" ", ", ", " and ", "\n", " (not ", " rather than "])
def test_naming_both_options_scores_as_the_wrong_one(join):
    paid = []
    for task, rival in _comparisons():
        gold = task.answer[0]
        alone = f1(rival, task.answer, task.question)
        assert f1(gold, task.answer, task.question) == 1.0
        for hedge in (gold + join + rival, rival + join + gold):
            if f1(hedge, task.answer, task.question) > alone or \
                    exact_match(hedge, task.answer, task.question):
                paid.append((task.id, hedge))
    assert paid == []


def test_every_shipped_gold_still_grades_correct_with_its_question():
    tasks = [t for name in sorted(QA_SETS) for t in load_qa(name)]
    wrong = [(t.id, g) for t in tasks for g in t.answer
             if exact_match(g, t.answer, t.question) != 1.0 or f1(g, t.answer, t.question) != 1.0]
    assert wrong == []


@pytest.mark.parametrize("answer, value", [
    ("Terry Richardson", 1.0), ("Terry Richardson Annie Morton", 0.0),
    ("Annie Morton Terry Richardson", 0.0), ("Terry Richardson\u2028Annie Morton", 0.0),
    ("Terry Richardson vs Annie Morton", 0.0), ("Terry Richardson → Annie Morton", 0.0),
])
def test_rewards_read_the_question_for_its_options(answer, value):
    task = Task("q", "Who is older, Annie Morton or Terry Richardson?", ["Terry Richardson"],
                {"domain": "knowledge"})
    for metric in ("em", "f1"):
        assert SearchR1Protocol().grade(QAReward(metric), task, [f"<answer>{answer}</answer>"],
                                        Trajectory()).value == value
    out = AutoTIRProtocol().grade(AutoTIRReward(), task, [f"<answer>{answer}</answer>"],
                                  Trajectory())
    assert out.components["f1"] == pytest.approx(value)
