"""The answers a probe is built from: the task's gold, and wrong answers of the same kind.

Wrong answers come from the env itself (other tasks' golds: another query for SQL, another
entity for QA, another number for math), plus numeric neighbours of a numeric gold and the
other letters of a multiple-choice gold, so a hedge can be built around the gold (``41 or 42``,
``[41, 43]``, ``A, B, C, D``) and a grader that pays for it is caught.

A reward that pays numbers near the gold declares how near (``Tolerance``: ``rel_tol`` and/or
``abs_tol`` on the reward or the env, as ``|answer - gold| <= rel_tol * |gold| + abs_tol``):
the neighbours are then drawn outside it, and so are other tasks' golds used as wrong answers,
so an honest wrong answer is never one the reward rightly pays.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_LETTER = re.compile(r"[A-J]")
#: filler wrong answers when the env has too few distinct golds
_FILLER = ("audit-wrong-alpha", "audit-wrong-beta")


def gold_text(answer: Any) -> str | None:
    """One gold answer as text (the first alias of a list), or ``None`` without a gold."""
    if answer is None:
        return None
    if isinstance(answer, (list, tuple)):
        return gold_text(answer[0]) if answer else None
    text = str(answer).strip()
    return text or None


@dataclass(frozen=True)
class Tolerance:
    """How far from a numeric gold a reward still pays (module docstring)."""

    rel_tol: float = 0.0
    abs_tol: float = 0.0

    def width(self, gold: float) -> float:
        return self.rel_tol * abs(gold) + self.abs_tol

    def pays(self, answer: float, gold: float) -> bool:
        return abs(answer - gold) <= self.width(gold)


def tolerance_of(*owners: Any) -> Tolerance:
    """The tolerance the first of ``owners`` (the env's reward, the env) declares with
    ``rel_tol``/``abs_tol`` attributes; none by default."""
    for owner in owners:
        rel, absolute = getattr(owner, "rel_tol", None), getattr(owner, "abs_tol", None)
        if rel is not None or absolute is not None:
            return Tolerance(float(rel or 0.0), float(absolute or 0.0))
    return Tolerance()


@dataclass(frozen=True)
class Candidates:
    """The gold of one task and wrong answers of its kind (``wrong`` holds at least two)."""

    gold: str
    wrong: tuple[str, ...]
    tolerance: Tolerance = Tolerance()

    @property
    def number(self) -> float | None:
        """The gold as a number, when it is one (``42``, ``-3.5``)."""
        return float(self.gold) if _NUMBER.fullmatch(self.gold) else None

    @property
    def letter(self) -> str | None:
        """The gold as a multiple-choice letter, when it is one."""
        return self.gold if _LETTER.fullmatch(self.gold) else None

    def neighbours(self) -> tuple[str, str] | None:
        """Two numbers around a numeric gold (``41`` and ``43`` for ``42``), outside the
        reward's tolerance (``980`` and ``1020`` for ``1000`` at 1 %)."""
        n = self.number
        if n is None:
            return None
        step = 1 if n == int(n) else 0.5
        width = self.tolerance.width(n)
        if width >= step:  # the next numbers would be paid: step twice the tolerance away
            step = math.ceil(2 * width) if n == int(n) else 2 * width
        return _num(n - step), _num(n + step)

    def letters(self) -> str:
        """Every option letter up to the gold's (at least ``ABCD``)."""
        last = max("D", self.letter or "D")
        return "".join(chr(c) for c in range(ord("A"), ord(last) + 1))


def _num(x: float) -> str:
    return str(int(x)) if x == int(x) else f"{x:g}"


def goldless() -> Candidates:
    """The candidates of a task without a gold (an env whose reward is a remote's): no gold,
    filler wrong answers (what the probes that need no gold answer with)."""
    return Candidates("", _FILLER)


def candidates_for(answer: Any, others: Sequence[Any],
                   tolerance: Tolerance = Tolerance()) -> Candidates | None:
    """The candidates of a task whose gold is ``answer`` (``None`` for a task without a gold);
    ``others``: the golds of the env's other tasks; ``tolerance``: the reward's, if any."""
    gold = gold_text(answer)
    if gold is None:
        return None
    aliases = answer if isinstance(answer, (list, tuple)) else [answer]
    golds = {str(g).strip().lower() for g in aliases}
    wrong: list[str] = []
    base = Candidates(gold, (), tolerance)
    if base.neighbours():
        wrong += base.neighbours()
    if base.letter:
        wrong += [c for c in base.letters() if c != gold]
    for other in others:
        text = gold_text(other)
        if text and text.lower() not in golds and text not in wrong \
                and not _paid(text, base.number, tolerance):
            wrong.append(text)
    wrong += [f for f in _FILLER if f not in wrong]
    return Candidates(gold, tuple(wrong), tolerance)


def _paid(text: str, gold: float | None, tolerance: Tolerance) -> bool:
    """Whether a numeric ``text`` lies within the tolerance of a numeric gold."""
    if gold is None or not _NUMBER.fullmatch(text):
        return False
    return tolerance.pays(float(text), gold)
