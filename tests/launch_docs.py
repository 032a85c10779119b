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


def commands(doc: str, marker: str) -> list[list[str]]:
    """Every command in ``doc``'s bash blocks that contains ``marker``, as argv after it:
    continuation lines joined, comments dropped, shell variables left as they are."""
    out = []
    for block in bash_blocks(doc):
        lines = [ln.split("  #")[0].rstrip() if not ln.lstrip().startswith("#") else ""
                 for ln in block.splitlines()]
        joined = re.sub(r"\\\n", " ", "\n".join(lines))
        for line in joined.splitlines():
            if marker in line:  # what follows the marker (a quoted JSON before it may span lines)
                out.append(shlex.split(line.split(marker, 1)[1], comments=True))
    return out
