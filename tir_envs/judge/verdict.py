"""The strict verdict format, and the one parser of it.

The judge ends its output with exactly one verdict line, its last non-empty line:

* pointwise: ``VERDICT: 7`` (an integer 0..scale);
* grouped, scores: ``VERDICT: [7, 0, 10]`` (one integer per shown answer, in shown order);
* grouped, ranking: ``RANKING: A3 > A1 > A2`` (every label once, best first).

Reasoning before it is free text; a reasoning block (``<think>…</think>``) is dropped first.
Anything else is a ``VerdictError``: two verdict lines (one of them copied from an answer), a
verdict that is not last, a score out of range, a ranking missing a label, an output cut by
``max_tokens``.  The reward then pays 0 for the answers it covered: a policy that derails its
judge earns nothing and is never masked.
"""

from __future__ import annotations

import re
from typing import Sequence

MODES = ("pointwise", "scores", "ranking")
_POINT = re.compile(r"VERDICT:\s*(\d{1,3})")
_LIST = re.compile(r"VERDICT:\s*\[\s*(\d{1,3}(?:\s*,\s*\d{1,3})*)\s*\]")
_RANK = re.compile(r"RANKING:\s*(A\d{1,3}(?:\s*>\s*A\d{1,3})*)")
_HEAD = re.compile(r"^\W*(?:VERDICT|RANKING)\b", re.IGNORECASE)


class VerdictError(ValueError):
    """The judge's output is not one verdict in the strict format (the reason says why)."""


def instruction(mode: str, scale: int, labels: Sequence[str]) -> str:
    """How the judge is told to end its output, for ``mode`` (see the module docstring)."""
    if mode == "pointwise":
        return f"VERDICT: <one integer from 0 to {scale}>"
    if mode == "scores":
        shown = ", ".join(f"<score of {label}>" for label in labels)
        return f"VERDICT: [{shown}] (integers from 0 to {scale}, in that order)"
    return f"RANKING: {' > '.join('<label>' for _ in labels)} (every label once, best first)"


def parse_verdict(text: str, mode: str, scale: int, labels: Sequence[str],
                  finish_reason: str = "stop") -> list[float]:
    """Normalised scores (0..1) per label, in ``labels`` order, or ``VerdictError``."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if finish_reason != "stop":
        raise VerdictError(f"the judge's output was cut ({finish_reason}) before it ended")
    line = _verdict_line(_after_reasoning(text))
    if mode == "pointwise":
        return [_score(_full(_POINT, line).group(1), scale)]
    if mode == "scores":
        values = [_score(v, scale) for v in _full(_LIST, line).group(1).split(",")]
        if len(values) != len(labels):
            raise VerdictError(f"{len(values)} scores for {len(labels)} answers")
        return values
    order = [x.strip() for x in _full(_RANK, line).group(1).split(">")]
    if sorted(order) != sorted(labels):
        raise VerdictError(f"the ranking {order} does not hold each of {list(labels)} once")
    k = len(order)
    place = {label: i for i, label in enumerate(order)}
    return [1.0 if k == 1 else (k - 1 - place[label]) / (k - 1) for label in labels]


def _after_reasoning(text: str) -> str:
    if "</think>" in text:
        return text[text.rfind("</think>") + len("</think>"):]
    if "<think>" in text:
        raise VerdictError("the judge's reasoning block never closed")
    return text


def _verdict_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    heads = [ln for ln in lines if _HEAD.match(ln)]
    if not heads:
        raise VerdictError("no verdict line")
    if len(heads) > 1:
        raise VerdictError(f"{len(heads)} verdict lines (exactly one is allowed)")
    if lines[-1] is not heads[0]:
        raise VerdictError("the verdict line is not the output's last line")
    return heads[0]


def _full(pattern: re.Pattern, line: str) -> re.Match:
    m = pattern.fullmatch(line)
    if m is None:
        raise VerdictError(f"the verdict line {line[:80]!r} is not in the required format")
    return m


def _score(value: str, scale: int) -> float:
    n = int(value)
    if not 0 <= n <= scale:
        raise VerdictError(f"score {n} is outside 0..{scale}")
    return n / scale
