"""The values a chain of equalities states, each of which must be the answer.

Math-Verify grades one side of ``a = b``, so ``\\sqrt{1681} = 42`` was paid against 42 and
``42 = 40+1`` against 41: a wrong value beside the right one, which the plain-number rule of
``hedge`` (``41 = 42``) does not see once a side is an expression.  Against a single-valued
gold that states no equality, every side of a top-level ``=`` chain that is a *value* must
grade as the gold; a side that is a *name* (``x``, ``a_1``, ``f(41)``, ``P(A)``,
``\\angle ABC``, ``\\|v\\|``: letters, with digits only in subscripts, superscripts or
arguments) is not graded.  ``P(A) = \\frac14 = 0.25`` pays; ``x = 41 \\quad x = 42`` does
not (its middle side ``41 \\quad x`` is no name and not 42).
"""

from __future__ import annotations

import re

_OPEN, _CLOSE = "{([", "})]"
_SCRIPT = re.compile(r"[_^]\s*(?:\{[^{}]*\}|\\?[A-Za-z0-9])")
_ARGS = re.compile(r"\([^()]*\)")
_COMMAND = re.compile(r"\\[A-Za-z]+")


def top_level_sides(text: str) -> list[str]:
    """``text`` split at each ``=`` outside braces, brackets and parentheses (not ``==``,
    ``<=``, ``>=``, ``!=``, ``\\=``)."""
    sides, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in _OPEN and text[i - 1:i] != "\\":
            depth += 1
        elif ch in _CLOSE and text[i - 1:i] != "\\":
            depth = max(depth - 1, 0)
        elif ch == "=" and depth == 0 and text[i - 1:i] not in ("<", ">", "!", "\\", "=") \
                and text[i + 1:i + 2] != "=":
            sides.append(text[start:i])
            start = i + 1
    return sides + [text[start:]]


def is_name(side: str) -> bool:
    """Whether a side of an equality names a quantity rather than stating a value: letters
    (and commands), digits only in sub/superscripts or arguments."""
    rest = _SCRIPT.sub(" ", side)
    while _ARGS.search(rest):
        rest = _ARGS.sub(" ", rest)
    rest = _COMMAND.sub(" ", rest)
    return not re.search(r"\d", rest) and bool(re.search(r"[A-Za-z]", side))


def stated_values(text: str) -> list[str] | None:
    """The value sides of a chain with at least two of them (each must be the answer), or
    ``None`` when ``text`` states at most one value (graded whole, as before)."""
    sides = top_level_sides(text)
    if len(sides) < 2:
        return None
    values = [s.strip() for s in sides if s.strip() and not is_name(s)]
    return values if len(values) > 1 else None
