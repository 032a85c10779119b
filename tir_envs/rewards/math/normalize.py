"""Cheap answer comparisons that settle the common cases without a symbolic engine.

Most graded pairs are identical strings or plain numbers (GSM8K, AIME, most of MATH).  Deciding
those in the caller's process skips the trip to a grader worker.  Only certain verdicts are
returned: equal strings are equal; two plain numbers (integers, decimals, ``a/b``,
``\\frac{a}{b}``) are equal when exactly equal and unequal when far apart (beyond any rounding
Math-Verify would forgive).  Everything else is left to Math-Verify.
"""

from __future__ import annotations

import re
from fractions import Fraction

_SPACING = re.compile(r"\\[,;:! ]|\\q?quad|~")
_LEFT_RIGHT = re.compile(r"\\(?:left|right)\b")
_INTEGER = re.compile(r"[+-]?\d+")
_GROUPED = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+")  # 1,000 / 12,345,678
_TRAILING_ZEROS = re.compile(r"([+-]?\d+)\.0+")
_DECIMAL = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+)")
_SLASH = re.compile(r"([+-]?)(\d+)/(\d+)")
_FRAC = re.compile(r"([+-]?)\\frac\{([+-]?\d+)\}\{(\d+)\}")
_FRAC_SHORT = re.compile(r"([+-]?)\\frac(\d)(\d)")
# Two rationals closer than this (relative) are left to Math-Verify, which rounds floats.
_FAR = Fraction(1, 10**4)


def light_normalize(answer: str) -> str:
    """Drop what never changes an answer's meaning: outer ``$``, LaTeX spacing commands,
    ``\\left``/``\\right``, ``{,}`` thousands groups, whitespace, and a final period."""
    s = answer.strip()
    if len(s) >= 2 and s.startswith("$") and s.endswith("$") and not s.startswith("\\$"):
        s = s.strip("$")
    s = _SPACING.sub("", s)
    s = _LEFT_RIGHT.sub("", s)
    s = s.replace("{,}", ",").replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = "".join(s.split())
    return s[:-1] if s.endswith(".") else s


def as_integer(answer: str) -> int | None:
    """The integer ``answer`` spells (``"1,000"``, ``"+7"``, ``"12.00"``), or ``None``."""
    if len(answer) > 64:  # huge literals go to the worker, where time and memory are bounded
        return None
    if _INTEGER.fullmatch(answer):
        return int(answer)
    if _GROUPED.fullmatch(answer):
        return int(answer.replace(",", ""))
    m = _TRAILING_ZEROS.fullmatch(answer)
    if m:
        return int(m.group(1))
    return None


def as_rational(answer: str) -> Fraction | None:
    """The exact number a plain numeric ``answer`` spells (integer, decimal, ``a/b``,
    ``\\frac{a}{b}``), or ``None``.  Expects ``light_normalize``d text."""
    if len(answer) > 64:
        return None
    n = as_integer(answer)
    if n is not None:
        return Fraction(n)
    if _DECIMAL.fullmatch(answer):
        return Fraction(answer)
    for pattern in (_SLASH, _FRAC, _FRAC_SHORT):
        m = pattern.fullmatch(answer)
        if m:
            sign, p, q = m.groups()
            if int(q) == 0:
                return None
            value = Fraction(int(p), int(q))
            return -value if sign == "-" else value
    return None


def quick_verdict(pred: str, gold: str) -> bool | None:
    """``True``/``False`` when the answers are certainly (in)equivalent, else ``None``."""
    a, b = light_normalize(pred), light_normalize(gold)
    if a == b and a:
        return True
    ra, rb = as_rational(a), as_rational(b)
    if ra is None or rb is None:
        return None
    if ra == rb:
        return True
    if ra.denominator == 1 and rb.denominator == 1:
        return False
    if abs(ra - rb) > _FAR * max(1, abs(rb)):
        return False
    return None
