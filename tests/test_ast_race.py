"""Issue 29, item 6: ``SystemError: AST constructor recursion depth mismatch``.

CPython 3.11.0–3.11.7 and 3.12.0–3.12.1 (python/cpython#106905) keep one AST-construction
depth counter per interpreter.  Another ``ast.parse`` during a tree's construction (in another
thread while a garbage collection inside it runs a finalizer, or in the finalizer itself)
resets it, and the first parse fails although its source is fine: what failed
``test_docs_references`` in a full ``make test``.  A caught ``RecursionError`` (deep Python
recursion, deep JSON, a too-deep expression's AST) leaves nothing behind.  Each case runs in a
fresh interpreter, with the collector set to run inside the construction.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
AFFECTED = (3, 11, 0) <= sys.version_info[:3] <= (3, 11, 7) or \
    (3, 12, 0) <= sys.version_info[:3] <= (3, 12, 1)

#: a finalizer that parses, collected during a parse of a 2,000-line module
REENTRANT = """
import ast, gc
{setup}
class ParsesOnDelete:
    def __init__(self):
        self.cycle = self
    def __del__(self):
        ast.parse("x = 1")
source = "\\n".join(f"a{{i}} = ({{i}} + {{i}}) * {{i}}" for i in range(2000))
gc.collect()
gc.set_threshold(100)
ParsesOnDelete()
try:
    {parse}(source)
    print("ok")
except SystemError as e:
    print("SystemError", e)
"""


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, text=True,
                         capture_output=True, timeout=120, env={"PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.skipif(not AFFECTED, reason="this CPython builds ASTs with a counter per call")
def test_the_race_is_cpythons_and_reproduces():
    assert _run(REENTRANT.format(setup="", parse="ast.parse")).startswith(
        "SystemError AST constructor recursion depth mismatch")


def test_parse_source_survives_the_race():
    """The sandbox parses every cell with it (a cell's own threads can race the next cell's
    parse), and so do the tests that read the project's sources."""
    setup = "from tir_envs.tools.python.sandbox.interpreter import parse_source"
    assert _run(REENTRANT.format(setup=setup, parse="parse_source")) == "ok"


def test_a_caught_recursion_error_leaves_ast_construction_working():
    code = """
    import ast, json
    source = open("tir_envs/env.py").read()
    def deep(n):
        return deep(n + 1)
    for bomb in (lambda: deep(0), lambda: json.loads("[" * 100000 + "]" * 100000),
                 lambda: ast.parse("x" + " + x" * 200000)):
        try:
            bomb()
        except RecursionError:
            pass
        for _ in range(10):
            ast.parse(source)
    print("ok")
    """
    assert _run(code) == "ok"
