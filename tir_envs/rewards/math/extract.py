"""Finding the final answer a policy wrote: the last ``\\boxed{...}`` (or ``\\fbox{...}``).

Braces are matched by counting, so nested groups (``\\boxed{\\frac{1}{2}}``) come out whole; an
escaped brace (``\\{``) does not count.  The caller passes only text the policy generated: an
answer printed by a tool is never an answer the policy gave.
"""

from __future__ import annotations

import re

# \boxed{...}, \fbox{...}, also with a space before the brace ("\boxed {x}").
_OPENER = re.compile(r"\\(?:boxed|fbox)\s*\{")
# The brace-less form "\boxed 5": one token up to whitespace or a dollar sign.
_BARE = re.compile(r"\\boxed[ \t]+([^\s${][^\s$]*)")


def _closing_brace(text: str, start: int) -> int | None:
    """Index of the brace closing the group that opens just before ``start``, or None."""
    depth = 1
    i = start
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:  # skip escaped characters such as \{ and \}
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def boxed_spans(text: str) -> list[tuple[int, int, str]]:
    """Every complete boxed answer in ``text`` as ``(start, end, content)``, in order."""
    spans: list[tuple[int, int, str]] = []
    for m in _OPENER.finditer(text):
        close = _closing_brace(text, m.end())
        if close is not None:
            spans.append((m.start(), close + 1, text[m.end():close]))
    for m in _BARE.finditer(text):
        spans.append((m.start(), m.end(), m.group(1)))
    spans.sort()
    return spans


def extract_answer(text: str | None) -> str | None:
    """The content of the last complete ``\\boxed{}``/``\\fbox{}`` in ``text``, stripped.

    Returns ``None`` when there is none (or it is empty): a missing answer is not an empty one.
    """
    if not text:
        return None
    spans = boxed_spans(text)
    if not spans:
        return None
    # The one that closes last; a box inside it (``\\boxed{\\boxed{3}}``) is unwrapped.
    content = max(spans, key=lambda span: (span[1], -span[0]))[2].strip()
    inner = extract_answer(content) if _OPENER.search(content) or _BARE.search(content) else None
    return inner or content or None
