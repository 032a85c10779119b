"""Every file and module the docs name exists: README.md, docs/*.md, and the docstrings and
comments of the source.  Renaming or deleting a module then fails here, not in a reader's hands.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from tir_envs.tools.python.sandbox.interpreter import parse_source

ROOT = Path(__file__).resolve().parents[1]
OURS = ("tir_envs", "benchmarks", "trainers", "docs", "tests")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SOURCES = sorted(p for pkg in OURS[:3] for p in (ROOT / pkg).rglob("*.py"))

#: ``x.py`` or ``a/b/x.py``
_PY_FILE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.py)\b")
#: ``tir_envs.rewards.math``, ``tir_envs.bench.cli``, ``tir_envs.trainers.grpo.config.GRPOConfig``
_MODULE = re.compile(r"(?<![\w.])((?:tir_envs|benchmarks|trainers)(?:\.\w+)+)")
#: ``tir_envs/data/qa``, ``docs/search.md``
_REPO_PATH = re.compile(rf"(?<![\w.-])((?:{'|'.join(OURS)})/[\w./-]*\w)")
_LINK = re.compile(r"\]\(([^)#\s]+)")
#: every virtual environment in the checkout (.venv, and .venv-verl, .venv-trl, .venv-vllm that
#: `make test` builds) holds other projects' files, not ours
_ALL_NAMES = {p.name for p in ROOT.rglob("*.py")
              if not any(part.startswith(".venv") for part in p.relative_to(ROOT).parts)}


def prose_of(path: Path) -> str:
    """A source file's docstrings and comments (what a reader takes as documentation)."""
    text = path.read_text()
    docs = [ast.get_docstring(node) for node in ast.walk(parse_source(text))
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    comments = [tok.string for tok in tokenize.generate_tokens(io.StringIO(text).readline)
                if tok.type == tokenize.COMMENT]
    return "\n".join([d for d in docs if d] + comments)


def missing_py_files(text: str, where: Path) -> list[str]:
    """``*.py`` names that are no file of the project.  A path under a folder that is not ours
    (``openrlhf/utils/agent.py``) is another project's and is not checked."""
    missing = []
    for ref in _PY_FILE.findall(text):
        head = ref.split("/", 1)[0]
        if "/" in ref and head not in OURS and not (where.parent / head).exists():
            continue
        found = (ROOT / ref).exists() or (where.parent / ref).exists() if "/" in ref \
            else ref in _ALL_NAMES
        if not found:
            missing.append(ref)
    return missing


def missing_modules(text: str) -> list[str]:
    """Dotted names that are neither a project module nor a name defined in one."""
    missing = []
    for ref in _MODULE.findall(text):
        parts = ref.split(".")
        depth = next((i for i in range(len(parts), 0, -1) if _module_file(parts[:i])), 0)
        if depth == 0:
            missing.append(ref)
        elif depth < len(parts):
            source = _module_file(parts[:depth]).read_text()
            if not re.search(rf"\b{re.escape(parts[depth])}\b", source):
                missing.append(ref)
    return missing


def _module_file(parts: list[str]) -> Path | None:
    base = ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_doc_pages_name_only_what_exists(doc):
    text = doc.read_text(encoding="utf-8")
    missing = missing_py_files(text, doc) + missing_modules(text)
    missing += [ref for ref in _REPO_PATH.findall(text) if not (ROOT / ref).exists()]
    missing += [ref for ref in _LINK.findall(text)
                if not ref.startswith(("http://", "https://")) and not (doc.parent / ref).exists()]
    assert missing == []


def test_docstrings_and_comments_name_only_what_exists():
    missing = [f"{path.relative_to(ROOT)}: {ref}" for path in SOURCES
               for ref in missing_py_files(prose_of(path), path) + missing_modules(prose_of(path))]
    assert missing == []


@pytest.mark.parametrize("text, expected", [
    ("see tokens.py", ["tokens.py"]),
    ("see codec.py and tir_envs/codec.py", []),
    ("OpenRLHF's openrlhf/utils/agent.py", []),
    ("`tir_envs.tools.search.protocol.SEARCH_R1_TEMPLATE`",
     ["tir_envs.tools.search.protocol.SEARCH_R1_TEMPLATE"]),
    ("`tir_envs.protocols.search_r1.SEARCH_R1_TEMPLATE`", []),
    ("`tir_envs.rewards.math.no_such_name`", ["tir_envs.rewards.math.no_such_name"]),
])
def test_the_checker_finds_stale_names(text, expected):
    where = ROOT / "docs" / "probe.md"
    assert missing_py_files(text, where) + missing_modules(text) == expected
