"""Issue 36 item 7: a fast start.  ``import tir_envs``, ``tir-envs --help`` and ``tir-envs bench
list`` load no Gymnasium, NumPy, transformers or asyncio (each in a fresh process); the
``tir/*`` ids are still registered whenever Gymnasium is imported, in either order, and the
package's names still work.  (Times are measured by ``benchmarks/perf/startup.py``, not here.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("gymnasium", "numpy", "transformers", "tokenizers", "torch", "asyncio")


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def _loaded_after(code: str) -> list[str]:
    return json.loads(_run(f"""
import io, contextlib, sys
with contextlib.redirect_stdout(io.StringIO()):
{code}
print(__import__('json').dumps([m for m in {HEAVY!r} if m in sys.modules]))"""))


@pytest.mark.parametrize("code", [
    "    import tir_envs",
    "    from tir_envs.cli import main\n    try:\n        main(['--help'])\n"
    "    except SystemExit:\n        pass",
    "    from tir_envs.cli import main\n    main(['bench', 'list'])",
    "    from tir_envs.cli import main\n    try:\n        main(['rollout', '--help'])\n"
    "    except SystemExit:\n        pass",
])
def test_the_command_line_starts_without_heavy_imports(code):
    assert _loaded_after(code) == []


@pytest.mark.parametrize("code", [
    "import tir_envs, gymnasium as gym",
    "import gymnasium as gym, tir_envs",
    "import tir_envs.env, gymnasium as gym",
    "import tir_envs.registry, gymnasium as gym",
])
def test_the_ids_are_registered_in_any_import_order(code):
    assert _run(f"{code}\nprint(sorted(i for i in gym.registry if i.startswith('tir/')))") == \
        str(["tir/AutoTIR-v0", "tir/MathCode-v0", "tir/OpenEnv-v0", "tir/SQL-v0",
             "tir/Search-v0", "tir/ToolUse-v0"])


def test_the_package_names_work_when_used():
    out = _run("import tir_envs\n"
               "env = tir_envs.make('tir/MathCode-v0')\n"
               "print(type(env.unwrapped).__name__, tir_envs.TIREnv.__name__, "
               "tir_envs.Task.__name__, callable(tir_envs.audit), 'make' in dir(tir_envs))")
    assert out == "MathCodeEnv TIREnv Task True True"
