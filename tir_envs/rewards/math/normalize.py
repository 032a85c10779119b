"""Answer preparation, and cheap comparisons that settle the common cases without SymPy.

``prepare_answer`` runs on both sides of every pair before anything else, so the quick path and
Math-Verify see the same text: Python/SymPy notation becomes LaTeX (``codestyle``), a boxed
``\\text{The answer is } ...`` loses its words, and ``x = 58,500`` keeps its thousands together.

Most graded pairs are identical strings or plain numbers (GSM8K, AIME, most of MATH).  Deciding
those in the caller's process skips the trip to a grader worker.  Only certain verdicts are
returned (``quick_verdict``): equal strings are equal; two plain numbers (integers, decimals,
``a/b``, ``\\frac{a}{b}``) are equal when exactly equal and unequal when they differ by more than
any tolerance the full check allows.  Everything else (a close decimal, ``32, 349``, ``0,111``)
is left to the worker, which applies the same number rule (``numbers_agree``) inside Math-Verify.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction

from tir_envs.rewards.math.codestyle import code_to_latex

# Relative tolerance between a decimal and the gold: |pred - gold| <= REL_TOL * |gold|.
DEFAULT_REL_TOL = 1e-6

_SPACING = re.compile(r"\\[,;:! ]\s*|\\q?quad\s*|~")
_LEFT_RIGHT = re.compile(r"\\(?:left|right)\b")
_COMMA_SPACE = re.compile(r",\s+")
_INTEGER = re.compile(r"[+-]?\d+")
_GROUPED = re.compile(r"[+-]?[1-9]\d{0,2}(?:,\d{3})+")  # 1,000 / 12,345,678 (not 0,111)
_TRAILING_ZEROS = re.compile(r"([+-]?\d+)\.0+")
_DECIMAL = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+)")
_SLASH = re.compile(r"([+-]?)(\d+)/(\d+)")
_FRAC = re.compile(r"([+-]?)\\frac\{([+-]?\d+)\}\{(\d+)\}")
_FRAC_SHORT = re.compile(r"([+-]?)\\frac(\d)(\d)")
# Two numbers closer than this (relative) are left to the worker; farther apart they are
# certainly different, whatever tolerance a pool is given up to this size.
_FAR = Fraction(1, 10**4)

# "\text{The answer is } 5", "The final answer is: 5", "\text{Answer: 5}" inside a box.
_PREFIX = r"\s*(?:the\s+)?(?:final\s+)?answer\s*(?:is|:)\s*:?\s*"
_TEXT_PREFIX = re.compile(r"\\(?:text|textbf|mathrm|mbox)\{" + _PREFIX, re.IGNORECASE)
_PLAIN_PREFIX = re.compile(_PREFIX, re.IGNORECASE)
# "x = 58,500": Math-Verify would read the right side as the pair {58, 500}.
_GROUPED_ASSIGNMENT = re.compile(
    r"([A-Za-z](?:_\{?\w+\}?)?\s*=\s*)([+-]?[1-9]\d{0,2}(?:(?:,|\{,\})\d{3})+)")


def _strip_answer_words(s: str) -> str:
    """Drop a leading "The answer is" (bare or in ``\\text{...}``) from a boxed answer."""
    m = _TEXT_PREFIX.match(s)
    if m:
        depth, i = 1, m.end()
        while i < len(s) and depth:  # find the text group's closing brace
            depth += {"{": 1, "}": -1}.get(s[i], 0)
            i += 1
        inner, rest = s[m.end():i - 1], s[i:]
        return (inner + rest).strip() if depth == 0 else s
    m = _PLAIN_PREFIX.match(s)
    return s[m.end():].strip() if m and s[m.end():].strip() else s


@functools.lru_cache(maxsize=8192)  # answers repeat across a GRPO group; keys are <= 4000 chars
def prepare_answer(answer: str) -> str:
    """``answer`` as the grader reads it (see the module docstring); values never change."""
    # words first too: code rules would read "Answer: 12" as an assignment
    s = code_to_latex(_strip_answer_words(answer.strip()))
    s = _strip_answer_words(s)
    m = _GROUPED_ASSIGNMENT.fullmatch(s)
    if m:
        s = m.group(1) + re.sub(r"\{,\}|,", "", m.group(2))
    return s


def light_normalize(answer: str) -> str:
    """Drop what never changes an answer's meaning: outer ``$``, LaTeX spacing commands,
    ``\\left``/``\\right``, ``{,}`` thousands groups, whitespace (except one space after a comma:
    ``32, 349`` is two numbers, ``32,349`` one), and a final period."""
    s = answer.strip()
    if len(s) >= 2 and s.startswith("$") and s.endswith("$") and not s.startswith("\\$"):
        s = s.strip("$")
    s = _SPACING.sub("", s)
    s = _LEFT_RIGHT.sub("", s)
    s = s.replace("{,}", ",").replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = ", ".join("".join(part.split()) for part in _COMMA_SPACE.split(s))
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


def is_decimal(answer: str) -> bool:
    """Whether ``answer`` is written as a decimal that is not a whole number (``0.5``, ``.25``)."""
    return as_integer(answer) is None and bool(_DECIMAL.fullmatch(answer))


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


def numbers_agree(pred: Fraction, gold: Fraction, decimal: bool,
                  rel_tol: float = DEFAULT_REL_TOL) -> bool:
    """The grader's rule for two numbers.  An integer gold is matched only exactly (``3``,
    ``3.0``; never ``2.9999999``); exact forms (integers, fractions) must be equal; when a
    decimal is involved (``decimal``), ``|pred - gold| <= rel_tol * |gold|``."""
    if pred == gold:
        return True
    if gold.denominator == 1 or not decimal:
        return False
    return abs(pred - gold) <= Fraction(rel_tol) * abs(gold)


def quick_verdict(pred: str, gold: str, rel_tol: float = DEFAULT_REL_TOL) -> bool | None:
    """``True``/``False`` when the answers are certainly (in)equivalent, else ``None``.

    Expects ``prepare_answer``ed text.  Never disagrees with the worker's full check: it answers
    only for equal strings and for two plain numbers that are equal or far apart."""
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
    if abs(ra - rb) > max(_FAR, Fraction(rel_tol)) * max(1, abs(rb)):
        return False
    return None
