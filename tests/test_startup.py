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


# ---------------------------------------------------------------- issue 47 item 5
def test_the_tokenizer_loads_from_its_prepared_form(tmp_path, monkeypatch):
    """The bundled Qwen2.5 tokenizer is built once per sources' hash into the cache and then
    only loaded (a process no longer pays the BPE build and transformers' copy of it); the
    loaded one is the built one, token for token."""
    from transformers import PreTrainedTokenizerFast

    from tir_envs import tokenizer as tk

    monkeypatch.setenv("TIR_ENVS_CACHE", str(tmp_path))
    path = tk.prepared_qwen25()
    assert path.parent == tmp_path / "tokenizers" and path.is_file()
    assert list(path.parent.iterdir()) == [path]  # written whole: no partial file left

    def no_build():
        raise AssertionError("built again: the prepared form was not used")
    monkeypatch.setattr(tk, "_build_qwen25", no_build)
    assert tk.prepared_qwen25() == path
    tk.qwen25_tokenizer.cache_clear()
    try:
        loaded = tk.qwen25_tokenizer()
    finally:
        tk.qwen25_tokenizer.cache_clear()
    monkeypatch.undo()
    built = PreTrainedTokenizerFast(tokenizer_object=tk._build_qwen25(), eos_token="<|im_end|>",
                                    pad_token="<|endoftext|>", unk_token=None)
    text = "x = 6*7\n<|im_start|>user\nhé 你好<tool_call>{}</tool_call><|im_end|>\t  done"
    assert loaded.encode(text) == built.encode(text) and len(loaded) == len(built) == 151665
    assert (loaded.eos_token_id, loaded.pad_token_id) == (151645, 151643)
    assert loaded.chat_template == tk.CHATML_TEMPLATE


def test_the_prepared_tokenizer_is_keyed_by_its_sources(monkeypatch):
    from tir_envs import tokenizer as tk

    key = tk._qwen25_key()
    monkeypatch.setattr(tk, "QWEN2_PATTERN", tk.QWEN2_PATTERN + "|x")
    assert tk._qwen25_key() != key


def test_the_command_line_warms_the_sandbox_pool_before_the_policy_loads(monkeypatch):
    """``rollout`` and ``bench`` start the env's sandbox pool before loading the tokenizer,
    so the first tool result comes from a warm pool; not for other backends or envs."""
    from tir_envs.envs.mathcode import MathCodeEnv
    from tir_envs.envs.search import SearchEnv
    from tir_envs.envs.tooling import warm_sandbox
    from tir_envs.tools.python.pool.sandbox_pool import SandboxPool

    warmed = []
    monkeypatch.setattr(SandboxPool, "warm", lambda self: warmed.append(self.config))
    assert warm_sandbox(MathCodeEnv, {}) and len(warmed) == 1
    assert warm_sandbox(MathCodeEnv, {"backend": {"name": "local"}}) and len(warmed) == 2
    assert warmed[0] == warmed[1]  # the pool the env's own LocalBackend() will use
    assert not warm_sandbox(MathCodeEnv, {"backend": "e2b"})
    assert not warm_sandbox(SearchEnv, {})
    assert len(warmed) == 2
