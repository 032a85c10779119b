"""Where a generation ends: the first stop string or end-of-sequence token, kept in the output.

Backends that cannot stop on strings themselves (a scripted replay, a batched ``generate`` that
keeps sampling past a finished row, a server that ignores ``stop``) cut their ids here, so every
backend agrees on what an action is: everything up to and including the token that completed the
first stop string, or the first EOS token.  Ids are never re-encoded: the cut is found on the
decoded text and mapped back to the shortest id prefix whose text contains the stop string.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence


@dataclass
class Cut:
    """How many ids make the action, and why it ended (``finish_reason``/``stop_reason``)."""

    length: int
    finish_reason: str  # "stop" (stop string or EOS) or "length"
    stop_reason: str | None = None


def first_stop(text: str, stop: Sequence[str]) -> tuple[int, str] | None:
    """``(end, s)`` for the stop string ``s`` that ends earliest in ``text`` (``end`` is the index
    just after it), or ``None``."""
    best: tuple[int, str] | None = None
    for s in stop:
        if not s:
            continue
        i = text.find(s)
        if i >= 0 and (best is None or i + len(s) < best[0]):
            best = (i + len(s), s)
    return best


def cut_at_stop(ids: Sequence[int], decode: Callable[[Sequence[int]], str], stop: Sequence[str],
                eos_ids: Sequence[int] = (), max_tokens: int | None = None) -> Cut:
    """Find where an action made of ``ids`` ends (see the module docstring).

    ``decode`` turns ids into text.  The shortest prefix whose text contains a stop string is
    found by binary search (a stop string seen in a prefix stays in every longer prefix), so this
    costs a few decodes, not one per token.
    """
    limit = len(ids) if max_tokens is None else min(len(ids), max_tokens)
    eos = set(eos_ids)
    eos_at = next((i for i in range(limit) if ids[i] in eos), None)
    end = limit if eos_at is None else eos_at + 1
    stop = [s for s in stop if s]
    if stop and end and first_stop(decode(ids[:end]), stop) is not None:
        lo, hi = 1, end  # invariant: the prefix of length hi contains a stop string
        while lo < hi:
            mid = (lo + hi) // 2
            if first_stop(decode(ids[:mid]), stop) is not None:
                hi = mid
            else:
                lo = mid + 1
        return Cut(hi, "stop", first_stop(decode(ids[:hi]), stop)[1])
    if eos_at is not None:
        return Cut(end, "stop", None)
    # No stop string, no EOS: the cap ended it ("length"), or the producer simply ended there.
    capped = max_tokens is not None and limit >= max_tokens
    return Cut(limit, "length" if capped else "stop", None)
