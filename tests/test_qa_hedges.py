"""Issue 21, item 3 for the QA rewards (exact match and F1; Search-v0 and AutoTIR's knowledge
domain): an answer listing candidates earns no more than its worst candidate alone; golds
that themselves contain "and", "or", commas or slashes still grade correct.

Rows: (prediction, golds, em, f1)."""

from __future__ import annotations

import random

import pytest

from tir_envs.data.qa import QA_SETS, load_qa
from tir_envs.protocols.autotir import AutoTIRProtocol
from tir_envs.protocols.search_r1 import SearchR1Protocol
from tir_envs.rewards.autotir import AutoTIRReward
from tir_envs.rewards.qa import QAReward, candidates, exact_match, f1
from tir_envs.task import Task
from tir_envs.trajectory import Trajectory

HEDGES = [  # each scores 0: no more than the wrong candidate alone
    ("Paris or London", ["Paris"], 0.0, 0.0),
    ("either Paris or London", ["Paris"], 0.0, 0.0),
    ("Paris, London, Rome", ["Paris"], 0.0, 0.0),
    ("Paris/London", ["Paris"], 0.0, 0.0),
    ("Paris / London", ["Paris"], 0.0, 0.0),
    ("Paris and London", ["Paris"], 0.0, 0.0),
    ("Paris & London", ["Paris"], 0.0, 0.0),
    ("Paris and/or London", ["Paris"], 0.0, 0.0),
    ("Paris (or London)", ["Paris"], 0.0, 0.0),
    ("Paris, or London", ["Paris"], 0.0, 0.0),
    ("Paris; London", ["Paris"], 0.0, 0.0),
    ("Paris | London", ["Paris"], 0.0, 0.0),
    ("Paris\nLondon", ["Paris"], 0.0, 0.0),
    ("yes or no", ["yes"], 0.0, 0.0),
    ("1, 2, 3", ["2"], 0.0, 0.0),
    ("Denise Levertov or Harvey Pekar", ["Denise Levertov"], 0.0, 0.0),
    ("Helsinki, Finland", ["Helsinki"], 0.0, 0.0),  # the price: a place with its country
]

LEGIT = [
    ("Paris", ["Paris"], 1.0, 1.0),
    ("the Paris.", ["Paris"], 1.0, 1.0),
    ("Guthred or Guthfrith", ["Guthred or Guthfrith"], 1.0, 1.0),
    ("Guthred", ["Guthred or Guthfrith"], 0.0, 0.5),  # partial credit for a part of the gold
    ("Simon and Garfunkel", ["Simon and Garfunkel"], 1.0, 1.0),
    ("Kentucky, Virginia and Tennessee", ["Kentucky, Virginia, and Tennessee"], 1.0, 1.0),
    ("Helsinki, Finland", ["Helsinki, Finland"], 1.0, 1.0),
    ("June 10, 1982", ["June 10, 1982"], 1.0, 1.0),
    ("June 10 1982", ["June 10, 1982"], 1.0, 1.0),
    ("December 14, 1974", ["December 1974"], 0.0, 0.8),  # a date is one candidate
    ("9,000", ["9,000"], 1.0, 1.0),
    ("320 km/h", ["320 km/h"], 1.0, 1.0),
    ("1/2", ["1/2"], 1.0, 1.0),
    ("Punjabi/Pashtun", ["Punjabi/Pashtun"], 1.0, 1.0),
    ("NYC / New York City", ["NYC", "New York City"], 1.0, 1.0),  # both candidates are golds
    ("Priscilla Denise Levertov", ["Denise Levertov"], 0.0, 0.8),
    ("Ballon d'Or", ["Ballon d'Or"], 1.0, 1.0),
    ("Ballon d'Or winner", ["Ballon d'Or"], 0.0, 0.8),
    ("Oregon", ["Oregon"], 1.0, 1.0),
    ("Paris or Paris", ["Paris"], 1.0, 1.0),
]


@pytest.mark.parametrize("pred, golds, em, score", HEDGES + LEGIT)
def test_table(pred, golds, em, score):
    assert exact_match(pred, golds) == em
    assert f1(pred, golds) == pytest.approx(score)


@pytest.mark.parametrize("pred, golds, em, score", HEDGES)
def test_a_hedge_earns_no_more_than_its_worst_candidate(pred, golds, em, score):
    parts = candidates(pred, golds)
    assert len(parts) > 1
    assert f1(pred, golds) <= min(f1(p, golds) for p in parts)


def _shipped_tasks():
    return [t for name in sorted(QA_SETS) for t in load_qa(name)]


def test_every_shipped_gold_grades_correct_against_itself():
    tasks = _shipped_tasks()
    wrong = [(t.id, g) for t in tasks for g in t.answer
             if exact_match(g, t.answer) != 1.0 or f1(g, t.answer) != 1.0]
    assert wrong == []


@pytest.mark.parametrize("join", [" or ", ", ", " / ", " and ", "; ", "\n", "either {} or {}"])
def test_gold_plus_a_wrong_answer_never_beats_the_wrong_answer(join):
    """Hedges built from the shipped data: each task's first gold joined with another task's
    gold, in both orders; wherever the task's golds do not use that separator themselves, the
    hedge scores no more than the wrong answer alone."""
    tasks = _shipped_tasks()
    rng = random.Random(0)
    checked, paid = 0, []
    for task in rng.sample(tasks, 400):
        other = rng.choice(tasks)
        wrong = other.answer[0]
        if f1(wrong, task.answer) > 0 or exact_match(task.answer[0], [wrong]):
            continue
        for a, b in ((task.answer[0], wrong), (wrong, task.answer[0])):
            hedge = join.format(a, b) if "{}" in join else a + join + b
            if len(candidates(hedge, task.answer)) < 2:
                continue  # the golds use this separator: compared whole, as the gold says
            checked += 1
            if f1(hedge, task.answer) > f1(wrong, task.answer) or exact_match(hedge, task.answer):
                paid.append((task.id, hedge))
    assert checked >= 300 and paid == []


@pytest.mark.parametrize("action, value", [
    ("<answer>Paris</answer>", 1.0),
    ("<answer>Paris or London</answer>", 0.0),
    ("<answer>either Paris or London</answer>", 0.0),
    ("<answer>Paris, London, Rome</answer>", 0.0),
    ("<answer>London</answer>", 0.0),
])
@pytest.mark.parametrize("metric", ["em", "f1"])
def test_qa_reward_end_to_end(metric, action, value):
    result = SearchR1Protocol().grade(QAReward(metric), Task("q", "Capital of France?", ["Paris"]),
                                      [action], Trajectory())
    assert result.value == value


@pytest.mark.parametrize("action, value", [
    ("<answer>Paris</answer>", 0.9), ("<answer>Paris or London</answer>", 0.0),
    ("<answer>Paris/London</answer>", 0.0), ("<answer>\\text{Paris, London}</answer>", 0.0),
])
def test_autotir_knowledge_domain_hedges_score_like_a_wrong_answer(action, value):
    """AutoTIR's knowledge outcome is F1, the score hedges exploited (read as scored: eq. 5's
    format gate would give these unboxed answers 0 whatever their F1)."""
    task = Task("q", "Capital of France?", ["Paris"], {"domain": "knowledge"})
    result = AutoTIRProtocol().grade(AutoTIRReward(output_reward="plain"), task, [action],
                                     Trajectory())
    assert result.components["r_out"] == pytest.approx(value / 0.9)
