"""Identifier quoting for SQL tests and benchmarks: a Spider gold spelled as other data sets
spell it (SkyRL/OmniSQL-style backticks, double quotes, brackets), names only."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Callable

#: identifier quoting styles SQLite reads: SkyRL/OmniSQL-style data uses backticks
QUOTES = {"backtick": ("`", "`"), "double": ('"', '"'), "bracket": ("[", "]")}
_SQL_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\[[^\]]*\]"
                        r"|[A-Za-z_]\w*|\s+|.", re.DOTALL)


def schema_names(db_path: str | Path) -> set[str]:
    """The database's table and column names, lower-cased."""
    con = sqlite3.connect(Path(db_path).resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    try:
        tables = [r[0] for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        names = {t.lower() for t in tables}
        for table in tables:
            names |= {r[1].lower() for r in con.execute(f'PRAGMA table_info("{table}")')}
        return names
    finally:
        con.close()


def quote_identifiers(sql: str, names: set[str], style: "str | Callable[[int], str | None]"
                      ) -> str:
    """``sql`` with every table and column name (a word in ``names`` that is no function call)
    quoted in ``style`` (``QUOTES``), or in ``style(i)`` for the ``i``-th name (``None``: left
    bare); strings, numbers and keywords untouched."""
    tokens = _SQL_TOKEN.findall(sql)
    out, seen = [], 0
    for i, token in enumerate(tokens):
        following = next((t for t in tokens[i + 1:] if not t.isspace()), "")
        if token.lower() in names and (token[0].isalpha() or token[0] == "_") and \
                following != "(":
            chosen = style if isinstance(style, str) else style(seen)
            seen += 1
            if chosen is not None:
                opener, closer = QUOTES[chosen]
                token = f"{opener}{token}{closer}"
        out.append(token)
    return "".join(out)
