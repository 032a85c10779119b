"""The import graph keeps its layers: lower parts never reach up to the parts built on them.

Read from the source files (every ``import``, including those inside functions and under
``TYPE_CHECKING``), so a lazy import cannot hide an upward dependency.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tir_envs", "benchmarks", "trainers")

#: what sits above each part of the library (it may import neither these nor anything above
#: them).  ``data`` still reads two reward modules (a gold solution's boxed answer, IFEval's
#: instruction arguments): the dataset loaders check records with the grader's own parsers.
_TOP = {"tir_envs.cli", "tir_envs.demo", "tir_envs.audit", "tir_envs.viewer", "benchmarks",
        "trainers"}
_RUNNERS = {"tir_envs.rollout", "tir_envs.registry"} | _TOP
_ENVS = {"tir_envs.env", "tir_envs.envs"} | _RUNNERS
FORBIDDEN: dict[str, set[str]] = {
    "tir_envs.data": {"tir_envs.tools", "tir_envs.protocols"} | _ENVS,
    "tir_envs.tools": {"tir_envs.rewards", "tir_envs.protocols"} | _ENVS,
    "tir_envs.rewards": {"tir_envs.protocols"} | _ENVS,
    "tir_envs.formats": {"tir_envs.tools", "tir_envs.rewards", "tir_envs.protocols"} | _ENVS,
    "tir_envs.protocols": _ENVS,
    "tir_envs.trajectory": {"tir_envs.tools", "tir_envs.rewards", "tir_envs.protocols"} | _ENVS,
    "tir_envs.codec": {"tir_envs.tools", "tir_envs.rewards", "tir_envs.protocols"} | _ENVS,
    "tir_envs.tokenizer": {"tir_envs.tools", "tir_envs.rewards", "tir_envs.protocols"} | _ENVS,
    "tir_envs.env": {"tir_envs.envs"} | _RUNNERS,
    "tir_envs.envs": _RUNNERS,
    "tir_envs.rollout": _TOP,
}
#: the command line assembles every part, so it alone may import ``benchmarks`` (shipped in the
#: same distribution); nothing in the library imports the trainers.
ALLOWED_UP = {("tir_envs.cli", "benchmarks")}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, text: str | None = None) -> set[str]:
    """Every project module ``path`` (or ``text`` as its source) imports, relative imports
    resolved."""
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = set()
    source = path.read_text() if text is None else text
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[:len(package) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return {name for name in found if name.split(".")[0] in PACKAGES}


def source_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def part(module: str) -> str:
    """The unit a rule is about: ``tir_envs.<sub>`` inside the library, else the top package."""
    bits = module.split(".")
    return ".".join(bits[:2]) if bits[0] == "tir_envs" and len(bits) > 1 else bits[0]


def upward_imports(sources: dict[Path, str | None]) -> list[str]:
    """``path imports module`` for every import that breaks a rule (``None``: read the file)."""
    bad = []
    for path, text in sources.items():
        src = part(module_name(path))
        for target in sorted(imports_of(path, text)):
            dest = part(target)
            if dest == src or (src, dest) in ALLOWED_UP:
                continue
            outside_library = src.startswith("tir_envs") and dest in ("benchmarks", "trainers")
            if dest in FORBIDDEN.get(src, set()) or outside_library:
                bad.append(f"{path.relative_to(ROOT)} imports {target}")
    return bad


def test_no_part_imports_a_part_above_it():
    assert upward_imports(dict.fromkeys(source_files())) == []


@pytest.mark.parametrize("where, code, expected", [
    ("tir_envs/data/probe.py", "def f():\n    from tir_envs.tools.sql import database\n",
     ["tir_envs.tools.sql", "tir_envs.tools.sql.database"]),
    ("tir_envs/tools/probe.py", "from ..rewards import base\n",
     ["tir_envs.rewards", "tir_envs.rewards.base"]),
    ("tir_envs/rollout/probe.py", "import trainers.grpo\n", ["trainers.grpo"]),
    ("tir_envs/envs/probe.py", "from tir_envs.data.task import Task\n", []),
])
def test_the_checker_reports_upward_imports(where, code, expected):
    """The checker itself: lazy and relative upward imports are caught, downward ones pass."""
    assert upward_imports({ROOT / where: code}) == [f"{where} imports {m}" for m in expected]


#: a project module named in a string (``import_module("benchmarks.cli")``, an entry point)
_MODULE_STRING = re.compile(r"^(benchmarks|trainers)(\.\w+)+(:\w+)?$")


def test_library_loads_no_top_level_package_by_name():
    """The library reaches ``benchmarks``/``trainers`` only through imports a reader sees,
    never ``importlib.import_module("benchmarks.cli")`` or an entry-point string."""
    named = [f"{path.relative_to(ROOT)}: {node.value!r}"
             for path in source_files() if module_name(path).startswith("tir_envs")
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Constant) and isinstance(node.value, str)
             and _MODULE_STRING.match(node.value)]
    assert named == []


def test_bench_command_is_a_visible_import_of_a_shipped_package():
    """``tir-envs bench`` imports ``benchmarks.cli``, and pyproject ships ``benchmarks``."""
    import tomllib

    import benchmarks.cli
    from tir_envs.cli import SUBCOMMANDS
    assert SUBCOMMANDS["bench"] is benchmarks.cli
    assert ("benchmarks.cli" in imports_of(ROOT / "tir_envs" / "cli.py"))
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    assert "benchmarks*" in include
