"""The ``\\boxed{}`` scanner: every complete box in a text, and the last one's content.

A box is ``\\boxed{...}`` or ``\\fbox{...}`` (a space before the brace allowed) or the
brace-less ``\\boxed 5``.  Braces are matched by counting, so nested groups
(``\\boxed{\\frac{1}{2}}``) come out whole; an escaped brace (``\\{``) does not count.  This is
the answer convention the math papers share, read by dataset loaders (a worked solution's
answer), protocols and graders alike, so it sits with the formats, below all of them.
"""

from __future__ import annotations

import bisect
import re

__all__ = ["Box", "BoxUnwrapper", "boxed_spans", "find_boxes", "last_boxed_answer",
           "top_level_boxes"]

# \boxed{...}, \fbox{...}, also with a space before the brace ("\boxed {x}").
_OPENER = re.compile(r"\\(?:boxed|fbox)\s*\{")
# The brace-less form "\boxed 5": one token up to whitespace or a dollar sign.
_BARE = re.compile(r"\\boxed[ \t]+([^\s${][^\s$]*)")


_TOKEN = re.compile(r"\\.|[{}]", re.DOTALL)  # an escaped character (\{ counts as none), or a brace

Box = tuple[int, int, int, int]  # start, end, content start, content end


def find_boxes(text: str) -> list[Box]:
    """Every complete box in ``text``, sorted by start.  One pass over the braces (a stack), so
    thousands of unclosed ``\\boxed{`` cost linear time, not a scan to the end for each."""
    openers = {m.end() - 1: m.start() for m in _OPENER.finditer(text)}
    boxes: list[Box] = []
    if openers:
        stack: list[int] = []  # per open brace: its position
        for m in _TOKEN.finditer(text):
            token = m.group()
            if token == "{":
                stack.append(m.start())
            elif token == "}" and stack:
                brace = stack.pop()
                if brace in openers:
                    boxes.append((openers[brace], m.end(), brace + 1, m.start()))
    boxes += [(m.start(), m.end(), m.start(1), m.end(1)) for m in _BARE.finditer(text)]
    boxes.sort()
    return boxes


def boxed_spans(text: str) -> list[tuple[int, int, str]]:
    """Every complete boxed answer in ``text`` as ``(start, end, content)``, in order."""
    return [(start, end, text[a:b]) for start, end, a, b in find_boxes(text)]


def top_level_boxes(boxes: list[Box]) -> list[Box]:
    """The boxes not nested inside another (``\\boxed{\\boxed{3}}`` counts once)."""
    out: list[Box] = []
    for box in sorted(boxes, key=lambda b: (b[0], -b[1])):
        if out and box[0] < out[-1][1]:
            continue
        out.append(box)
    return out


class BoxUnwrapper:
    """A box's content, stripped; while it holds nothing but a box, that box's content
    (``\\boxed{\\boxed{3}}`` is ``3``; ``\\boxed{2 \\boxed{3}}`` stays whole: a hedge), unless
    it is empty.  Iterative, with the boxes indexed by their end, so deep nesting costs neither
    recursion nor quadratic time."""

    def __init__(self, text: str, boxes: list[Box]):
        self.text = text
        self.by_end = sorted(boxes, key=lambda b: (-b[1], b[0]))
        self.keys = [-b[1] for b in self.by_end]

    def __call__(self, box: Box) -> str:
        content = self.text[box[2]:box[3]].strip()
        while True:
            i = bisect.bisect_left(self.keys, -box[3])  # the first box closing inside this one
            if i == len(self.by_end) or self.by_end[i][0] < box[2]:
                return content
            inner = self.by_end[i]
            inner_content = self.text[inner[2]:inner[3]].strip()
            outside = self.text[box[2]:inner[0]] + self.text[inner[1]:box[3]]
            if not inner_content or outside.strip(" \t\n$"):
                return content  # a box beside other text is part of that text (a hedge)
            box, content = inner, inner_content


def last_boxed_answer(text: str | None) -> str | None:
    """The content of the last complete ``\\boxed{}``/``\\fbox{}`` in ``text``, stripped.

    Returns ``None`` when there is none (or it is empty): a missing answer is not an empty one.
    """
    if not text:
        return None
    boxes = find_boxes(text)
    if not boxes:
        return None
    unwrap = BoxUnwrapper(text, boxes)
    return unwrap(unwrap.by_end[0]) or None  # the box that closes last
