"""The symbolic check itself: Math-Verify, with its own timeouts switched off.

Math-Verify bounds its work with ``signal.alarm``, which only works on a process's main thread
and breaks off whatever that thread was doing.  Here its timeouts are disabled, and this code runs
only inside grader worker processes (``tir_envs.rewards.math.pool``) whose parent enforces the
time limit by killing a worker that overruns.  Parsed answers are cached per worker: in RL the
same gold answer is graded against every sample of its group.

Numbers follow the grader's own rule (``normalize.numbers_agree``: integers exact, decimals within
a relative tolerance) instead of Math-Verify's rounding to 6 decimal places, which calls
``.0000673`` equal to ``.0000672``.  The rule replaces Math-Verify's numeric comparison wherever
a decimal meets a number, also inside tuples, sets, intervals and matrices.

Sets, tuples and intervals compare only within their kind (``same_kind``): Math-Verify calls the
open interval ``(-1, 1)`` equal to the list ``-1, 1`` and to the set ``\\{-1, 1\\}``, and the list
``1, -2`` equal to ``(-2, 1)``, so a list of candidates would pay against an interval.  A
parenthesised pair stays one kind whichever way it is read (point or open interval).
"""

from __future__ import annotations

import functools
import logging
import re
from fractions import Fraction
from typing import Any

from tir_envs.rewards.math.extract import is_multi_valued
from tir_envs.rewards.math.hedge import read_pair
from tir_envs.rewards.math.normalize import DEFAULT_REL_TOL, numbers_agree, prepare_answer

_TEXT = re.compile(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}")

# Typical answer shapes.  Math-Verify's LaTeX parser (ANTLR) is slow on the first answer of each
# shape and fast afterwards; parsing these once makes a fresh worker fast from its first check.
WARMUP_ANSWERS = (
    "42", "-7", "3.5", "\\frac{3}{4}", "-\\frac{1}{2}", "\\dfrac{7}{2}", "2\\sqrt{3}",
    "\\frac{\\sqrt{3}}{2}", "1 \\pm \\sqrt{19}", "(1, 2)", "\\left( 3, \\frac{\\pi}{2} \\right)",
    "(6,31,-1)", "[2, 5)", "(-\\infty, 0] \\cup (1, \\infty)", "\\{1, 2, 3\\}", "1, -2", "x = 5",
    "y = 2x + 3", "6 - 5i", "30^\\circ", "10\\%", "\\$18", "5 \\text{ cm}", "\\text{(C)}",
    "\\text{Evelyn}", "x^2 + 2x + 1", "\\begin{pmatrix} 1 \\\\ -2 \\end{pmatrix}", "\\pi", "e^{2}",
    "\\log_2 5", "\\cos x", "52_8", "\\infty",
)


def _wrap(answer: str) -> str:
    """Present a bare answer the way Math-Verify's LaTeX extractor expects it."""
    if "\\boxed" in answer or "\\fbox" in answer:
        return answer
    return "\\boxed{" + answer + "}"


@functools.lru_cache(maxsize=8192)
def parse_answer(answer: str) -> tuple[Any, ...]:
    """Math-Verify's parse of one answer (empty when it finds nothing it understands)."""
    from math_verify import parse

    return tuple(parse(_wrap(answer), parsing_timeout=None))


def plain_text(answer: str) -> str:
    """Lower-cased text with LaTeX text wrappers, spaces and final period removed: the last
    resort for answers that are words (names, days, "yes")."""
    s = _TEXT.sub(r"\1", answer)
    s = "".join(s.split()).strip("$").lower()
    return s[:-1] if s.endswith(".") else s


# ---------------------------------------------------------------------------- numbers
_rel_tol = DEFAULT_REL_TOL  # set per check by verify_pair (a worker checks one pair at a time)


def _plain_number(x: Any) -> Fraction | None:
    """``x``'s value when it is a real number without symbols or a percent sign, else None."""
    import sympy

    if not isinstance(x, sympy.Basic) or x.free_symbols or x.has(sympy.UnevaluatedExpr):
        return None
    if not x.is_number:
        return None
    try:
        value = sympy.N(x, 30)
        if value.is_real is not True or not value.is_finite:
            return None
        return Fraction(str(value))
    except (TypeError, ValueError, ArithmeticError, AttributeError):
        return None


def _numeric_eq(original):
    """Math-Verify's numeric comparison, with ``numbers_agree`` wherever a decimal (a SymPy
    ``Float``) meets a number; everything else is left to ``original``."""
    import sympy

    def numeric_eq(gold, pred, float_rounding, numeric_precision):
        if isinstance(gold, sympy.Float) or isinstance(pred, sympy.Float):
            g, p = _plain_number(gold), _plain_number(pred)
            if g is not None and p is not None:
                return numbers_agree(p, g, True, _rel_tol)
        return original(gold, pred, float_rounding, numeric_precision)

    numeric_eq.original = original
    return numeric_eq


# ---------------------------------------------------------------------------- kinds
def answer_kind(x: Any) -> str:
    """What sort of answer ``x`` (a Math-Verify parse) is: ``"pair"`` (``(a, b)``: an open
    interval or a 2-tuple, the same text either way), ``"interval"`` (any other interval or
    union of sets of reals), ``"tuple"``, ``"set"`` (a list or set of several values) or
    ``"value"`` (anything else, a one-element set included)."""
    import sympy

    if isinstance(x, sympy.Interval):
        return "pair" if x.left_open and x.right_open else "interval"
    if isinstance(x, sympy.Tuple):
        return "pair" if len(x) == 2 else "tuple"
    if isinstance(x, sympy.FiniteSet):
        return "set" if len(x) > 1 else "value"
    if isinstance(x, sympy.Set):
        return "interval"
    return "value"


def same_kind(gold: Any, pred: Any) -> bool:
    """Whether ``pred`` may equal ``gold`` at all: the same ``answer_kind``, where an open
    interval also meets other sets of reals (``(0, 2)`` against ``(0, 1] \\cup (1, 2)``)."""
    a, b = answer_kind(gold), answer_kind(pred)
    if a == b:
        return True
    import sympy

    reals = {"pair", "interval"}
    return a in reals and b in reals and isinstance(gold, sympy.Set) and isinstance(pred, sympy.Set)


def _typed_sets(original):
    """Math-Verify's set comparison, refusing pairs of different kinds (``same_kind``)."""

    def compare_sets(gold, pred, float_rounding, numeric_precision):
        if not same_kind(gold, pred):
            return False
        return original(gold, pred, float_rounding, numeric_precision)

    compare_sets.original = original
    return compare_sets


@functools.lru_cache(maxsize=1)
def _install_number_rule() -> None:
    """Route Math-Verify's numeric comparison through the grader's number rule, and its set
    comparison through ``same_kind`` (once)."""
    from math_verify import grader

    if not hasattr(grader.sympy_numeric_eq, "original"):
        grader.sympy_numeric_eq = _numeric_eq(grader.sympy_numeric_eq)
    if not hasattr(grader.sympy_compare_sets, "original"):
        grader.sympy_compare_sets = _typed_sets(grader.sympy_compare_sets)


def verify_pair(pred: str, gold: str, rel_tol: float = DEFAULT_REL_TOL) -> bool:
    """Whether ``pred`` means the same answer as ``gold``.  May run long: call it in a worker.

    Both sides are read through ``prepare_answer`` (code-style answers become LaTeX) and
    ``hedge.read_pair`` (a hedge is wrong); numbers compare by ``numbers_agree`` with
    ``rel_tol``."""
    global _rel_tol
    _install_number_rule()
    _rel_tol = rel_tol
    pred, gold = prepare_answer(pred), prepare_answer(gold)
    pred, gold, hedge = read_pair(pred, gold, is_multi_valued(gold))
    if hedge:
        return False
    gold_parsed = parse_answer(gold)
    pred_parsed = parse_answer(pred)
    if gold_parsed and pred_parsed:
        from math_verify import verify

        if verify(list(gold_parsed), list(pred_parsed), timeout_seconds=None):
            return True
    text = plain_text(gold)
    return bool(text) and text == plain_text(pred)


def warm_up() -> None:
    """Parse ``WARMUP_ANSWERS`` once (about a second) and forget the parses themselves."""
    for answer in WARMUP_ANSWERS:
        try:
            verify_pair(answer, answer + " ")
        except Exception:  # noqa: BLE001 - warming is best effort
            pass
    parse_answer.cache_clear()


def quiet() -> None:
    """Silence Math-Verify's per-call warnings (the disabled-timeout notice among them)."""
    for name in ("math_verify", "latex2sympy2_extended"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
