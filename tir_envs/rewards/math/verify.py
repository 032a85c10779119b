"""The symbolic check itself: Math-Verify, with its own timeouts switched off.

Math-Verify bounds its work with ``signal.alarm``, which only works on a process's main thread
and breaks off whatever that thread was doing.  Here its timeouts are disabled, and this code runs
only inside grader worker processes (``tir_envs.rewards.math.pool``) whose parent enforces the
time limit by killing a worker that overruns.  Parsed answers are cached per worker: in RL the
same gold answer is graded against every sample of its group.
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Any

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


def verify_pair(pred: str, gold: str) -> bool:
    """Whether ``pred`` means the same answer as ``gold``.  May run long: call it in a worker."""
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
