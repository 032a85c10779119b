"""``tir-envs demo``: three scripted episodes through the real sandbox, printed readably."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tir_envs.cli import main
from tir_envs.demo import DEMO_SCRIPTS, run_lengths, summary_table, EpisodeReport

ROOT = Path(__file__).resolve().parents[1]


def test_demo_runs_every_recipe_end_to_end(capsys):
    assert main(["demo", "--no-color"]) == 0
    out = capsys.readouterr().out
    for recipe, task_id, _ in DEMO_SCRIPTS:
        assert f"{recipe.upper()} · {task_id}" in out
    assert "A conversation between User and Assistant" in out          # prompts
    assert "ACTION" in out and "loss mask 1 (policy)" in out            # policy tokens
    assert "OBSERVATION" in out and "loss mask 0 (env)" in out          # env tokens
    assert "NameError: name 'totl' is not defined" in out               # real sandbox output
    assert "3.0 0.5" in out                                             # ToRL's computed r, θ/π
    assert "<|im_start|>tool\n" in out.replace("    │ ", "")              # RITE tool message
    assert re.search(r"MASK +prompt \d+ \| 1×\d+ 0×\d+ 1×\d+", out)      # mask runs
    table = out.split("━━ Summary ━━")[1]
    rows = [line for line in table.splitlines() if line.startswith(("torl", "zerotir", "rite"))]
    assert len(rows) == 3 and all(" yes " in row for row in rows)
    assert "\033[" not in out  # --no-color


def test_demo_single_recipe(capsys):
    assert main(["demo", "--protocol", "rite", "--no-color", "--full"]) == 0
    out = capsys.readouterr().out
    assert "RITE ·" in out and "TORL ·" not in out
    assert "<tools>" in out  # --full prints the whole system prompt with the tool schemas


def test_helpers():
    assert run_lengths([1, 1, 0, 0, 0, 1]) == "1×2 0×3 1×1"
    row = EpisodeReport("torl", "math500/test/algebra/1.json", 2, 1, 10, 5, "7", "7", True,
                        1.0, False)
    table = summary_table([row])
    assert "algebra/1.json" in table and "+1.00" in table


#: the demo as ``make demo`` runs it on the core install (no PyTorch: ``torch`` unimportable),
#: with every warning shown and a resource left open at exit an error
_CORE_DEMO = ("import sys; sys.modules['torch'] = None\n"
              "from tir_envs.cli import main\nsys.exit(main(['demo', '--no-color']))")


def _python(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "always"}
    env.pop("TRANSFORMERS_NO_ADVISORY_WARNINGS", None)
    return subprocess.run([sys.executable, "-W", "error::ResourceWarning", "-c", code],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_demo_on_the_core_install_prints_no_noise():
    """No 'PyTorch was not found' (the core needs only transformers' tokenizers), no Gymnasium
    render-fps warning, no unclosed event loop at exit: stderr stays empty."""
    control = _python("import sys; sys.modules['torch'] = None\nimport transformers")
    assert "PyTorch was not found" in control.stderr  # what the demo would otherwise print
    out = _python(_CORE_DEMO)
    assert out.returncode == 0, out.stderr
    assert "━━ Summary ━━" in out.stdout
    assert out.stderr == ""
