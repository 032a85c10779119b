"""Tagged spans (``<tag>…</tag>``) found in time linear in the text.

A lazy pattern such as ``<tool_call>(.*?)</tool_call>`` scans from every opening tag to the
end of the text when no closing tag follows: an action of 8,000 ``<tool_call>`` tokens cost
5 s to parse, 16,000 four times that, in the env's ``step`` (and an ``<answer>`` flood as
much in a reward).  ``TaggedPattern`` keeps the pattern (so every match, group and position
is the one it gives) but runs it only between an opening tag and the first closing tag after
it, found with ``str.find``; a tag with no closing tag left is never searched for again.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator


class TaggedPattern:
    """``pattern`` (matching ``<name>…</name>`` for one of ``names``, lazily, opening tag
    first) with linear-time ``finditer``, ``search``, ``findall`` and ``sub``."""

    def __init__(self, pattern: str | re.Pattern, names: Iterable[str]):
        self.pattern = re.compile(pattern, re.DOTALL) if isinstance(pattern, str) else pattern
        names = list(names)
        self._open = re.compile("<(" + "|".join(re.escape(n) for n in names) + ")>")

    def finditer(self, text: str) -> Iterator[re.Match]:
        pos, exhausted = 0, set()
        while True:
            opening = self._open.search(text, pos)
            if opening is None:
                return
            name = opening.group(1)
            close = -1 if name in exhausted else text.find(f"</{name}>", opening.end())
            if close < 0:
                exhausted.add(name)
                pos = opening.start() + 1
                continue
            m = self.pattern.match(text, opening.start(), close + len(name) + 3)
            if m is None:  # the pattern asks more than the tags (none of ours does)
                pos = opening.start() + 1
                continue
            yield m
            pos = max(m.end(), opening.start() + 1)

    def search(self, text: str) -> re.Match | None:
        return next(self.finditer(text), None)

    def findall(self, text: str) -> list:
        out = []
        for m in self.finditer(text):
            groups = m.groups()
            out.append(m.group(0) if not groups else groups[0] if len(groups) == 1 else groups)
        return out

    def sub(self, repl: str, text: str) -> str:
        parts, last = [], 0
        for m in self.finditer(text):
            parts += [text[last:m.start()], m.expand(repl)]
            last = m.end()
        return "".join(parts) + text[last:]
