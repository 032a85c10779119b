"""Query results as a compact text table, capped in rows, cell width and characters.

One line per row, cells separated by `` | `` and not padded (padding costs tokens and tells a
model nothing).  Every cut is marked where it happens (a cell ending in ``…``, a line saying how
many rows are not shown), and the table always ends with the row count, so the policy knows
whether it saw everything.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Sequence

NULL_TEXT = "NULL"
ELLIPSIS = "…"


def cell_text(value: Any, max_chars: int) -> str:
    """One value as table text: NULL, floats as repr, newlines escaped, long text cut."""
    if value is None:
        text = NULL_TEXT
    elif isinstance(value, float):
        text = repr(value)
    elif isinstance(value, dt.datetime):
        text = value.isoformat(sep=" ")
    elif isinstance(value, (bytes, bytearray, memoryview)):
        text = "0x" + bytes(value).hex()
    else:
        text = str(value)
    text = text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", " ")
    if len(text) > max_chars:
        text = text[:max(max_chars - 1, 0)] + ELLIPSIS
    return text


def render_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *,
                 more_rows: bool = False, max_rows: int = 50,
                 max_chars: int = 4000, max_cell_chars: int = 100) -> str:
    """The table text.

    ``rows`` are what was fetched; ``more_rows`` says the result had more than that.  At most
    ``max_rows`` rows are shown, fewer if the text would pass ``max_chars``.
    """
    header = " | ".join(cell_text(c, max_cell_chars) for c in columns)
    lines = [header, "-" * min(len(header), 80)] if columns else []
    budget = max_chars - sum(len(x) + 1 for x in lines) - 80  # room for the closing line
    shown = 0
    for row in rows[:max_rows]:
        line = " | ".join(cell_text(v, max_cell_chars) for v in row)
        if len(line) + 1 > budget:
            if shown:
                break
            line = line[:max(budget - 1, 0)] + ELLIPSIS  # a single huge row: cut the line
        lines.append(line)
        budget -= len(line) + 1
        shown += 1
    lines.append(_footer(shown, len(rows), more_rows))
    return "\n".join(lines)


def _footer(shown: int, fetched: int, more_rows: bool) -> str:
    """The closing line: the row count, or where the table was cut."""
    if more_rows:
        return f"[cut: showing the first {shown} rows; the result has more than {fetched}]"
    plural = "row" if fetched == 1 else "rows"
    if shown == fetched:
        return f"({fetched} {plural})"
    return f"[cut: showing the first {shown} of {fetched} {plural}]"
