"""Comparing two query results: value normalisation, multisets with a float tolerance, ordered
runs of tied rows, and the search for a consistent column mapping.

The convention (``docs/sql.md`` states it in full):

* values are normalised (``normalize_value``): ``1 == 1.0``, ``Decimal``/``bool`` as numbers,
  dates and times as ISO text, ``NULL == NULL``, strings stay strings (``'7' != 7``);
  floats agree when equal to ``SIGNIFICANT_DIGITS`` significant digits, or within
  ``REL_TOL`` of each other (which rescues two values on either side of a rounding boundary);
* the two results need the same number of columns and rows; the prediction's columns may come
  in any order, but one mapping of its columns onto the gold's must hold for every row;
* rows are compared as multisets (duplicates count), or, when the gold is ordered, in order,
  where rows whose sort keys tie form a run that may come in any order (``TieGroup``).

Column mapping: each gold column may only map to a prediction column with the same multiset of
values (its *signature*, computed at a coarse float precision so tolerance never hides a
candidate).  Usually that leaves one candidate per column.  Otherwise a backtracking search
assigns columns one at a time, checking every new pair of columns against every assigned one
(the multiset of value pairs must agree), and never tries two prediction columns that are
identical value for value at the same step (they would give the same result).  Each complete
mapping is checked in full.  The search visits at most ``MAX_MAPPING_NODES`` assignments; past
that it gives up and the results do not match (no real result comes near: it takes many
columns with equal value multisets that no pair check can tell apart).
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

SIGNIFICANT_DIGITS = 10
REL_TOL = 1e-9
#: the coarse precision of column signatures and of the tolerance fallback's buckets
COARSE_DIGITS = 6
MAX_MAPPING_NODES = 20_000


# --------------------------------------------------------------------------- values

def normalize_value(value: Any) -> Any:
    """A hashable, engine-neutral form of one result value (see the module doc)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, (float, decimal.Decimal)):
        return _number(float(value), SIGNIFICANT_DIGITS)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, (list, tuple)):
        return tuple(normalize_value(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), normalize_value(v)) for k, v in value.items()))
    return str(value)


def _number(x: float, digits: int) -> Any:
    if math.isnan(x) or math.isinf(x):
        return str(x)
    rounded = float(f"{x:.{digits}g}")
    if rounded.is_integer() and abs(rounded) < 2 ** 53:
        return int(rounded)
    return rounded


_AS_IS = frozenset({type(None), str, int})


def normalize_rows(rows: Sequence[Sequence[Any]]) -> list[tuple]:
    """Every value normalised.  Works column by column: a column holding only text, integers
    and NULLs (most columns) is checked by C-level passes and left as it is."""
    rows = [r if r.__class__ is tuple else tuple(r) for r in rows]
    if not rows:
        return rows
    columns = list(zip(*rows))
    changed = False
    for j, column in enumerate(columns):
        if not set(map(type, column)) <= _AS_IS:
            columns[j] = tuple(map(normalize_value, column))
            changed = True
    return list(zip(*columns)) if changed else rows


def _coarse(value: Any) -> Any:
    """A normalised value at ``COARSE_DIGITS`` (numbers only)."""
    if isinstance(value, float):
        return _number(value, COARSE_DIGITS)
    if isinstance(value, int) and abs(value) >= 10 ** COARSE_DIGITS:
        return _number(float(value), COARSE_DIGITS)
    return value


def _close(a: Any, b: Any) -> bool:
    if a == b:
        return True
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=0.0)
    return False


def _order_key(value: Any) -> tuple:
    """A total order over normalised values of mixed types (for pairing, not for meaning)."""
    if value is None:
        return (0,)
    if isinstance(value, (int, float)):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    if isinstance(value, bytes):
        return (3, value)
    return (4, repr(value))


def _row_key(row: tuple) -> tuple:
    return tuple(_order_key(_coarse(v)) + _order_key(v) for v in row)


# --------------------------------------------------------------------------- multisets

def multiset_equal(a: Sequence[tuple], b: Sequence[tuple],
                   a_counts: Counter | None = None) -> bool:
    """Whether ``a`` and ``b`` hold the same rows as multisets, floats within tolerance
    (``a_counts``: ``Counter(a)`` when the caller keeps it)."""
    if len(a) != len(b):
        return False
    if list(a) == list(b):  # same rows in the same order: the usual case, and the cheapest
        return True
    left, right = a_counts if a_counts is not None else Counter(a), Counter(b)
    if left == right:
        return True
    only_a, only_b = left - right, right - left
    # Tolerance fallback: the unmatched rows must agree at the coarse precision, then pair up.
    if Counter(tuple(map(_coarse, r)) for r in only_a.elements()) != \
            Counter(tuple(map(_coarse, r)) for r in only_b.elements()):
        return False
    xs = sorted(only_a.elements(), key=_row_key)
    ys = sorted(only_b.elements(), key=_row_key)
    return all(len(x) == len(y) and all(map(_close, x, y)) for x, y in zip(xs, ys))


def submultiset(a: Sequence[tuple], pool: Counter) -> bool:
    """Whether every row of ``a`` can be drawn from ``pool`` (exact, after normalisation)."""
    return not (Counter(a) - pool)


def rows_equal_in_order(a: Sequence[tuple], b: Sequence[tuple]) -> bool:
    return len(a) == len(b) and all(
        x == y or (len(x) == len(y) and all(map(_close, x, y))) for x, y in zip(a, b))


@dataclass(frozen=True)
class TieGroup:
    """Consecutive gold rows with equal sort keys: ``taken`` of them are in the gold result;
    ``pool`` holds every row of the full ordering with that key (more when LIMIT cut it)."""

    taken: int
    pool: Counter


def ordered_match(gold_rows: Sequence[tuple], pred_rows: Sequence[tuple],
                  runs: Sequence[TieGroup] | None) -> bool:
    """Whether ``pred_rows`` follow the gold's order: exactly, or run by run when the tie
    structure is known (rows of one run in any order; under LIMIT any of the tied rows)."""
    if runs is None:
        return rows_equal_in_order(gold_rows, pred_rows)
    if len(gold_rows) != len(pred_rows):
        return False
    pos = 0
    for run in runs:
        segment = pred_rows[pos:pos + run.taken]
        pos += run.taken
        if run.taken == sum(run.pool.values()):
            if not multiset_equal(segment, list(run.pool.elements())):
                return False
        elif not submultiset(segment, run.pool):
            return False
    return True


# --------------------------------------------------------------------------- column mapping

def column_mappings(gold_rows: Sequence[tuple], pred_rows: Sequence[tuple],
                    width: int) -> Iterator[tuple[int, ...]]:
    """Candidate mappings ``m`` (gold column ``j`` <- prediction column ``m[j]``) that pass the
    signature and pair checks (see the module doc); each still needs the full check."""
    return _MappingSearch(gold_rows, pred_rows, width).mappings()


class _MappingSearch:
    def __init__(self, gold_rows: Sequence[tuple], pred_rows: Sequence[tuple], width: int):
        self.width = width
        self.gold = [tuple(_coarse(r[j]) for r in gold_rows) for j in range(width)]
        self.pred = [tuple(_coarse(r[i]) for r in pred_rows) for i in range(width)]
        self.pred_exact = [tuple(r[i] for r in pred_rows) for i in range(width)]
        gold_sig = [Counter(c) for c in self.gold]
        pred_sig = [Counter(c) for c in self.pred]
        self.candidates = [[i for i in range(width) if pred_sig[i] == gold_sig[j]]
                           for j in range(width)]
        self.nodes = 0
        self._pairs: dict[tuple[str, int, int], Counter] = {}

    def _pair(self, side: str, a: int, b: int) -> Counter:
        key = (side, a, b)
        if key not in self._pairs:
            cols = self.gold if side == "g" else self.pred
            self._pairs[key] = Counter(zip(cols[a], cols[b]))
        return self._pairs[key]

    def mappings(self):
        if any(not c for c in self.candidates):
            return
        order = sorted(range(self.width), key=lambda j: len(self.candidates[j]))
        assigned: dict[int, int] = {}
        yield from self._extend(order, 0, assigned, set())

    def _extend(self, order: list[int], k: int, assigned: dict[int, int], used: set[int]):
        if k == len(order):
            yield tuple(assigned[j] for j in range(self.width))
            return
        j = order[k]
        tried: set[tuple] = set()
        for i in self.candidates[j]:
            if i in used or self.pred_exact[i] in tried:
                continue
            tried.add(self.pred_exact[i])
            self.nodes += 1
            if self.nodes > MAX_MAPPING_NODES:
                return
            if all(self._pair("g", j, j2) == self._pair("p", i, i2)
                   for j2, i2 in assigned.items()):
                assigned[j] = i
                used.add(i)
                yield from self._extend(order, k + 1, assigned, used)
                del assigned[j]
                used.discard(i)


@dataclass(frozen=True)
class GoldResult:
    """The normalised gold rows, their width, and how order is judged."""

    rows: tuple[tuple, ...]
    width: int
    ordered: bool
    runs: tuple[TieGroup, ...] | None = None  # tie structure, when the sort keys could be read

    def matches(self, pred_rows: Sequence[tuple], pred_width: int) -> bool:
        """Whether normalised prediction rows match this gold result (module doc)."""
        if pred_width != self.width or len(pred_rows) != len(self.rows):
            return False
        if not self.rows:
            return True  # both empty, same width
        if self._same(pred_rows):
            return True
        if self.width == 1:
            return False
        for mapping in column_mappings(self.rows, pred_rows, self.width):
            if mapping == tuple(range(self.width)):
                continue  # tried first
            if self._same([tuple(row[i] for i in mapping) for row in pred_rows]):
                return True
        return False

    def _same(self, pred_rows: Sequence[tuple]) -> bool:
        if self.ordered:
            return ordered_match(self.rows, pred_rows, self.runs)
        return multiset_equal(self.rows, pred_rows, self._counts)

    @functools.cached_property
    def _counts(self) -> Counter:
        return Counter(self.rows)
