"""Length normalisation: a longer answer is not paid for being longer.

Judges favour long answers (verbosity bias), and padding is the cheapest way to exploit one.
An answer up to its budget keeps its judged score; past the budget the score shrinks linearly
to 0 at twice the budget (the overlong shaping of DAPO), and an answer beyond that is not sent
to the judge at all.  The budget follows the reference (``ratio`` times its length, at least
``floor``) or, without one, ``no_reference``.  Length is counted in units of a word or 8
characters, whichever is more, so a wall of text without spaces is as long as it looks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def length_units(text: str) -> int:
    return max(len(text.split()), math.ceil(len(text) / 8))


@dataclass(frozen=True)
class LengthNorm:
    """The length budget of an answer (see the module docstring); ``budget`` fixes it."""

    budget: int | None = None
    ratio: float = 4.0
    floor: int = 64
    no_reference: int = 256

    def __post_init__(self) -> None:
        if self.budget is not None and self.budget < 1:
            raise ValueError(f"budget must be >= 1 (length units), got {self.budget}")
        if self.ratio <= 0 or self.floor < 1 or self.no_reference < 1:
            raise ValueError("ratio > 0, floor >= 1 and no_reference >= 1 are required")

    def budget_for(self, reference: str | None) -> int:
        if self.budget is not None:
            return self.budget
        if reference is None:
            return self.no_reference
        return max(self.floor, math.ceil(self.ratio * length_units(reference)))

    def factor(self, answer: str, reference: str | None) -> float:
        """1 within the budget, falling to 0 at twice it; 0 beyond."""
        b, n = self.budget_for(reference), length_units(answer)
        if n <= b:
            return 1.0
        return max(0.0, (2 * b - n) / b)


#: no normalisation (a test's naive judge)
OFF = LengthNorm(budget=10 ** 9)
