"""No tracked file keeps a merge's conflict markers.

A merge that stops on a conflict writes ``<<<<<<< ours``, ``=======`` and ``>>>>>>> theirs``
lines into the file; committed by mistake, they leave both sides' text in place (README.md
carried one for a while).  Every tracked text file is checked, line by line.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# built from pieces so this file does not match itself
_MARKER = re.compile("^(?:" + "<" * 7 + " |" + "=" * 7 + "$|" + ">" * 7 + " )", re.MULTILINE)


def tracked_files() -> list[Path]:
    """The files git tracks here (a checkout without git: every file outside dot folders)."""
    if shutil.which("git") and (ROOT / ".git").exists():
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True, timeout=60).stdout
        return [ROOT / name for name in out.decode().split("\0") if name]
    return [p for p in ROOT.rglob("*") if p.is_file()
            and not any(part.startswith(".") for part in p.relative_to(ROOT).parts)]


def conflict_lines(text: str) -> list[int]:
    """The 1-based numbers of the lines of ``text`` that are conflict markers."""
    return [text.count("\n", 0, m.start()) + 1 for m in _MARKER.finditer(text)]


def test_no_tracked_file_holds_conflict_markers():
    found = []
    for path in tracked_files():
        if not path.is_file():  # deleted in the work tree, not yet committed
            continue
        data = path.read_bytes()
        if b"\0" in data:  # binary (databases, archives)
            continue
        lines = conflict_lines(data.decode("utf-8", errors="replace"))
        if lines:
            found.append(f"{path.relative_to(ROOT)}: lines {lines}")
    assert found == [], "merge-conflict markers left in: " + "; ".join(found)


@pytest.mark.parametrize("text, expected", [
    ("a\n" + "<" * 7 + " HEAD\nb\n" + "=" * 7 + "\nc\n" + ">" * 7 + " main\n", [2, 4, 6]),
    ("Title\n" + "=" * 8 + "\n", []),             # a longer underline is a heading
    ("x = '" + "<" * 7 + " '\n", []),             # not at the start of a line
    ("=" * 7 + " table border\n", []),            # the middle marker is the whole line
])
def test_the_checker_finds_markers_and_only_them(text, expected):
    assert conflict_lines(text) == expected
