"""The launch commands the adapter docs show, read back out of the Markdown so a test can hand
each to the framework's own parser: what a user copies is what is checked."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
_BLOCK = re.compile(r"```bash\n(.*?)```", re.S)


def bash_blocks(doc: str) -> list[str]:
    return _BLOCK.findall((DOCS / doc).read_text(encoding="utf-8"))


def _command_lines(block: str) -> list[str]:
    """The block's commands: continuation lines joined, comments dropped, a newline inside
    quotes (a JSON argument over several lines) kept inside its command."""
    out, current, quote = [], [], None
    text = re.sub(r"\\\n", " ", block)
    i = 0
    while i < len(text):
        ch = text[i]
        if quote is None and ch == "#" and (i == 0 or text[i - 1] in " \n"):
            while i < len(text) and text[i] != "\n":  # a comment runs to the end of its line
                i += 1
            continue
        if quote is None and ch in "'\"":
            quote = ch
        elif ch == quote and text[i - 1] != "\\":
            quote = None
        if ch == "\n" and quote is None:
            out.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    out.append("".join(current))
    return [c.strip() for c in out if c.strip()]


def commands(doc: str, marker: str) -> list[list[str]]:
    """Every command in ``doc``'s bash blocks that contains ``marker``, as argv after it
    (shell variables left as they are)."""
    out = []
    for block in bash_blocks(doc):
        for line in _command_lines(block):
            if marker in line:
                out.append(shlex.split(line.split(marker, 1)[1]))
    return out


def full_commands(doc: str, marker: str) -> list[list[str]]:
    """Like ``commands``, the whole argv (environment assignments and the program included)."""
    return [shlex.split(line) for block in bash_blocks(doc) for line in _command_lines(block)
            if marker in line]
