"""The README's usage snippet runs as printed and means what it says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def usage_snippet() -> str:
    usage = (ROOT / "README.md").read_text(encoding="utf-8").split("## Usage", 1)[1]
    return re.search(r"```python\n(.*?)```\n", usage, re.DOTALL).group(1)


def test_the_usage_snippet_earns_its_reward_and_leaves_nothing_open():
    """The snippet's task is what its code computes, so the printed reward is ToRL's +1 with
    ``correct`` True; run with warnings shown and unclosed resources as errors, its stderr
    is empty (no render-fps warning, no unclosed event loop at exit)."""
    env = {**os.environ, "PYTHONWARNINGS": "always"}
    out = subprocess.run([sys.executable, "-W", "error::ResourceWarning", "-c", usage_snippet()],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "1024" in lines
    reward_line = next(line for line in lines if "policy tokens of" in line)
    assert reward_line.split()[:2] == ["1.0", "True"]
    assert "[observation] '\\n1024\\n```\\n'" in lines
    assert out.stderr == ""
