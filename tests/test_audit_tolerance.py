"""Issue 36 item 8: an audit of a reward that pays answers within a tolerance.  The reward
declares it (``rel_tol``/``abs_tol``) and the audit's wrong answers are drawn outside it; a
baseline graded correct is warned about once per task, not once per strategy."""

from __future__ import annotations

import importlib
import sys

import pytest

import tir_envs
from tests.user_env_helpers import write_units
from tir_envs.audit.candidates import Tolerance, candidates_for
from tir_envs.rewards.base import RewardResult

TASKS = [{"id": "k", "question": "1 km in metres?", "answer": 1000},
         {"id": "c", "question": "300 m in metres?", "answer": 300}]


@pytest.fixture()
def units(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(write_units(tmp_path)))
    sys.modules.pop("units", None)
    yield importlib.import_module("units")
    sys.modules.pop("units", None)


def tolerant_env(units, declare: bool):
    def tolerant(task, trajectory, answer):
        """Pays any answer within 1 % of the gold (a measured quantity, say)."""
        gold = float(task.answer)
        correct = answer is not None and abs(float(answer) - gold) <= 0.01 * abs(gold)
        return RewardResult(float(correct), {"correct": float(correct)}, correct=correct,
                            answered=answer is not None)

    if declare:
        tolerant.rel_tol = 0.01
    return lambda: units.UnitsEnv(tasks=TASKS, reward=tolerant)


def test_neighbours_are_drawn_outside_the_declared_tolerance():
    plain = candidates_for(1000, [1000, 1005, 7])
    assert plain.wrong[:2] == ("999", "1001") and "1005" in plain.wrong
    tolerant = candidates_for(1000, [1000, 1005, 7], Tolerance(rel_tol=0.01))
    assert tolerant.wrong[:2] == ("980", "1020") and "1005" not in tolerant.wrong
    assert "7" in tolerant.wrong
    assert all(abs(float(w) - 1000) > 10 for w in tolerant.wrong if w.isdigit())
    assert candidates_for(2.5, [], Tolerance(abs_tol=0.2)).wrong[:2] == ("2", "3")  # outside
    assert candidates_for(2.5, [], Tolerance(abs_tol=0.6)).wrong[:2] == ("1.3", "3.7")


def test_a_declared_tolerance_passes_the_audit(units):
    report = tir_envs.audit(tolerant_env(units, declare=True), tasks=2)
    assert report.warnings == [] and report.ok, report.to_markdown()


def test_an_undeclared_tolerance_is_warned_once_per_task(units):
    report = tir_envs.audit(tolerant_env(units, declare=False), tasks=2,
                            probes=[p for p in tir_envs.audit.PROBES
                                    if p.name == "format.nested_answer"])
    graded = [w for w in report.warnings if "graded correct" in w]
    assert len(graded) == 2 and len(set(graded)) == 2  # one per task, not per strategy
    assert all("rel_tol" in w for w in graded)
    markdown = report.to_markdown()
    assert all(markdown.count(w) == 1 for w in graded)
