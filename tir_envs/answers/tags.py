"""Answers written inside a tag: Search-R1's ``<answer>`` and SkyRL-SQL's ``<solution>``.

The protocols that own these readings (``SearchR1Protocol``, ``SkyRLSQLProtocol``) call them
once per episode; the rewards grade what they return.
"""

from __future__ import annotations

import re

from tir_envs.formats.tagged import TaggedPattern

_ANSWER = TaggedPattern(r"<answer>(.*?)</answer>", ["answer"])


def extract_answer(text: str) -> str | None:
    """The body of the last complete ``<answer>…</answer>`` in ``text`` (stripped), if any.

    The last, as Search-R1 grades (its ``extract_solution`` keeps the last match): the one rule
    the Search-R1 protocol applies."""
    found = _ANSWER.findall(text)
    return found[-1].strip() if found else None


_FENCE = re.compile(r"^```[A-Za-z]*\s*\n?(.*?)\n?\s*```$", re.DOTALL)
_TAGS = ("<sql>", "</sql>", "<solution>", "</solution>", "<observation>", "</observation>")


def extract_solution(text: str) -> str | None:
    """The SQL in the action's ``<solution>…</solution>``, or ``None`` if the format is off.

    Exactly one ``<solution>``, closed, its block not empty and holding no other tag.  A
    Markdown code fence around the query is tolerated and removed.
    """
    start = text.find("<solution>")
    if start < 0 or text.find("<solution>", start + 1) >= 0:
        return None
    end = text.find("</solution>", start)
    if end < 0:
        return None
    sql = text[start + len("<solution>"):end].strip()
    if sql.startswith("```"):
        fenced = _FENCE.match(sql)
        if fenced:
            sql = fenced.group(1).strip()
    if not sql or any(tag in sql for tag in _TAGS):
        return None
    return sql
