"""The import graph keeps its layers: lower parts never reach up to the parts built on them,
and no two parts (folders) lean on each other, however long the loop.

Read from the source files (every ``import``, including those inside functions and under
``TYPE_CHECKING``), so a lazy import cannot hide an upward dependency or a loop.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tir_envs.tools.python.sandbox.interpreter import parse_source

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tir_envs", "benchmarks", "trainers")

#: what sits above each part of the library (it may import neither these nor anything above
#: them).  The ground floor (``tir_envs.task``) imports nothing of the project; the dataset
#: loaders read a worked solution's box with the scanner in ``formats`` and IFEval's arguments
#: with the schema in ``data.ifeval``, never a reward.
_TOP = {"tir_envs.cli", "tir_envs.demo", "tir_envs.audit", "tir_envs.viewer", "benchmarks",
        "trainers"}
_RUNNERS = {"tir_envs.rollout", "tir_envs.registry", "tir_envs.env_factory"} | _TOP
_ENVS = {"tir_envs.env", "tir_envs.envs"} | _RUNNERS
_LIBRARY = {"tir_envs.data", "tir_envs.tools", "tir_envs.rewards", "tir_envs.formats",
            "tir_envs.answers", "tir_envs.protocols", "tir_envs.trajectory", "tir_envs.codec",
            "tir_envs.tokenizer"} | _ENVS
FORBIDDEN: dict[str, set[str]] = {
    "tir_envs.task": _LIBRARY,
    "tir_envs.data": {"tir_envs.tools", "tir_envs.rewards", "tir_envs.protocols"} | _ENVS,
    "tir_envs.tools": {"tir_envs.rewards", "tir_envs.protocols"} | _ENVS,
    "tir_envs.rewards": {"tir_envs.protocols"} | _ENVS,
    "tir_envs.formats": {"tir_envs.data", "tir_envs.tools", "tir_envs.rewards",
                         "tir_envs.protocols"} | _ENVS,
    # how an answer is written and read sits beside the formats: the protocols own the reading
    # (``tir_envs.answers``), the rewards only grade what it returns
    "tir_envs.answers": {"tir_envs.data", "tir_envs.tools", "tir_envs.rewards",
                         "tir_envs.protocols"} | _ENVS,
    "tir_envs.protocols": {"tir_envs.rewards"} | _ENVS,
    "tir_envs.trajectory": {"tir_envs.tools", "tir_envs.rewards", "tir_envs.protocols"} | _ENVS,
    "tir_envs.codec": {"tir_envs.tools", "tir_envs.rewards", "tir_envs.protocols"} | _ENVS,
    "tir_envs.tokenizer": {"tir_envs.tools", "tir_envs.rewards", "tir_envs.protocols"} | _ENVS,
    "tir_envs.env": {"tir_envs.envs"} | _RUNNERS,
    "tir_envs.envs": _RUNNERS,
    "tir_envs.rollout": _TOP,
    # the trainers read the suite catalogue from the data floor (``tir_envs.data.suites``),
    # never the benchmark harness; neither top package reaches into the other
    "trainers": {"benchmarks", "tir_envs.cli"},
    "benchmarks": {"trainers"},
    # an LLM judge reward: a reward part reaching a model through the policy backends, so it
    # sits above rewards and rollout, below the envs' registry and the top
    "tir_envs.judge": {"tir_envs.env", "tir_envs.envs", "tir_envs.registry"} | _TOP,
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
    for node in ast.walk(parse_source(source, str(path))):
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
    """The unit a rule is about: ``tir_envs.<sub>`` inside the library, else the top package;
    ``tir_envs.bench.perf`` (measurement scripts, not shipped: they may time any part, trainers
    included) is a part of its own, on top of everything."""
    bits = module.split(".")
    if bits[:2] == ["benchmarks", "perf"]:
        return "tir_envs.bench.perf"
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


def part_graph(sources: dict[Path, str | None]) -> dict[str, dict[str, str]]:
    """``{part: {part it imports: one file-level import that shows it}}``."""
    graph: dict[str, dict[str, str]] = {}
    for path, text in sources.items():
        src = part(module_name(path))
        for target in sorted(imports_of(path, text)):
            dest = part(target)
            if dest != src:
                graph.setdefault(src, {}).setdefault(
                    dest, f"{path.relative_to(ROOT)} imports {target}")
    return graph


def cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected groups of more than one node (Tarjan), each sorted: every loop
    of the graph lies inside one of them."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def folder_loops(sources: dict[Path, str | None]) -> list[str]:
    """Each loop between parts, with the imports that close it."""
    graph = part_graph(sources)
    return ["; ".join(graph[a][b] for a in group for b in group if b in graph.get(a, {}))
            for group in cycles(graph)]


def test_no_two_parts_import_each_other_even_through_others():
    """``data -> rewards -> tools -> data`` broke no single arrow rule, yet it was a loop: none
    of the three could be understood, tested or moved without the other two."""
    assert folder_loops(dict.fromkeys(source_files())) == []


def module_graph(sources: dict[Path, str | None]) -> dict[str, dict[str, str]]:
    """``{module: {project module it imports: the file-level import that shows it}}``, from
    every import: at import time, later in a function, and under ``TYPE_CHECKING`` (an import
    for annotations only runs no code, but a reader of either module still needs the other:
    two modules that name each other's types are one idea split in two).

    ``from package import submodule`` is an arrow to the submodule only: Python has run the
    package's ``__init__`` before any of its modules, whoever imports them, so counting it
    would make every package that re-exports its modules a loop of its own."""
    modules = {module_name(path) for path in source_files()} | {module_name(p) for p in sources}
    graph: dict[str, dict[str, str]] = {}
    for path, text in sources.items():
        src = module_name(path)
        targets = {t for t in imports_of(path, text) if t in modules and t != src}
        for target in sorted(targets):
            if not any(other.startswith(target + ".") for other in targets):
                graph.setdefault(src, {})[target] = f"{path.relative_to(ROOT)} imports {target}"
    return graph


def module_loops(sources: dict[Path, str | None]) -> list[str]:
    graph = module_graph(sources)
    return ["; ".join(graph[a][b] for a in group for b in group if b in graph.get(a, {}))
            for group in cycles(graph)]


def test_no_two_modules_import_each_other():
    """Not even lazily: ``harness`` and ``ray_episodes`` once imported each other inside
    functions; the shared pieces now sit in a module both import."""
    assert module_loops(dict.fromkeys(source_files())) == []


def test_the_module_loop_checker_sees_lazy_imports_and_not_package_parents():
    harness, ray = ROOT / "benchmarks/harness.py", ROOT / "benchmarks/ray_episodes.py"
    lazy = {harness: "def f():\n    from tir_envs.bench.ray_episodes import connect\n",
            ray: "def g():\n    from tir_envs.bench.harness import run\n"}
    assert module_loops(lazy) == ["benchmarks/harness.py imports tir_envs.bench.ray_episodes; "
                                  "benchmarks/ray_episodes.py imports tir_envs.bench.harness"]
    parent = {ROOT / "benchmarks/__init__.py": "from tir_envs.bench.scoring import x\n",
              ROOT / "benchmarks/scoring.py": "from tir_envs.bench import metrics\n"}
    assert module_loops(parent) == []


def test_the_module_loop_checker_sees_type_only_imports():
    """The five-file loop of ``tools/python`` was closed by imports under ``TYPE_CHECKING``."""
    fork, session = ROOT / "tir_envs/tools/python/pool/fork_servers.py", \
        ROOT / "tir_envs/tools/python/pool/session.py"
    typed = {fork: "from tir_envs.tools.python.pool.session import SessionHandle\n",
             session: "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from tir_envs.tools.python.pool.fork_servers import ForkServer\n"}
    assert module_loops(typed) == [
        "tir_envs/tools/python/pool/fork_servers.py imports tir_envs.tools.python.pool.session; "
        "tir_envs/tools/python/pool/session.py imports tir_envs.tools.python.pool.fork_servers"]


def test_the_loop_checker_finds_long_loops():
    sources = {ROOT / "tir_envs/data/a.py": "from tir_envs.rewards import x\n",
               ROOT / "tir_envs/rewards/b.py": "from tir_envs.tools import y\n",
               ROOT / "tir_envs/tools/c.py": "def f():\n    import tir_envs.data.z\n",
               ROOT / "tir_envs/formats/d.py": "from tir_envs.task import Task\n"}
    assert folder_loops(sources) == [
        "tir_envs/data/a.py imports tir_envs.rewards; tir_envs/rewards/b.py imports "
        "tir_envs.tools; tir_envs/tools/c.py imports tir_envs.data.z"]


@pytest.mark.parametrize("where, code, expected", [
    ("tir_envs/data/probe.py", "def f():\n    from tir_envs.tools.sql import database\n",
     ["tir_envs.tools.sql", "tir_envs.tools.sql.database"]),
    ("tir_envs/tools/probe.py", "from ..rewards import base\n",
     ["tir_envs.rewards", "tir_envs.rewards.base"]),
    ("tir_envs/rollout/probe.py", "import tir_envs.trainers.grpo\n", ["tir_envs.trainers.grpo"]),
    ("trainers/common/probe.py", "def f():\n    from tir_envs.bench.suites import SUITES\n",
     ["tir_envs.bench.suites", "tir_envs.bench.suites.SUITES"]),
    ("tir_envs/envs/probe.py", "from tir_envs.task import Task\n", []),
])
def test_the_checker_reports_upward_imports(where, code, expected):
    """The checker itself: lazy and relative upward imports are caught, downward ones pass."""
    assert upward_imports({ROOT / where: code}) == [f"{where} imports {m}" for m in expected]


#: a project module named in a string (``import_module("tir_envs.bench.cli")``, an entry point)
_MODULE_STRING = re.compile(r"^(benchmarks|trainers)(\.\w+)+(:\w+)?$")


def test_library_loads_no_top_level_package_by_name():
    """The library reaches ``benchmarks``/``trainers`` only through imports a reader sees,
    never ``importlib.import_module("tir_envs.bench.cli")`` or an entry-point string."""
    named = [f"{path.relative_to(ROOT)}: {node.value!r}"
             for path in source_files() if module_name(path).startswith("tir_envs")
             for node in ast.walk(parse_source(path.read_text()))
             if isinstance(node, ast.Constant) and isinstance(node.value, str)
             and _MODULE_STRING.match(node.value)]
    assert named == []


def test_bench_command_is_a_visible_import_of_a_shipped_package():
    """``tir-envs bench`` imports ``tir_envs.bench.cli``, and pyproject ships ``benchmarks``."""
    import tomllib

    import tir_envs.bench.cli
    from tir_envs.cli import SUBCOMMANDS
    assert SUBCOMMANDS["bench"] is tir_envs.bench.cli
    assert ("tir_envs.bench.cli" in imports_of(ROOT / "tir_envs" / "cli.py"))
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    assert "benchmarks*" in include
