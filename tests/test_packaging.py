"""What pip and a reader are told about the package agrees with what the code needs."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_one_python_version_everywhere():
    """The code uses ``asyncio.timeout`` (3.11): pyproject, classifiers, README and Makefile
    all say 3.11, and no doc claims an older Python."""
    assert PROJECT["requires-python"] == ">=3.11"
    versions = [c.rsplit("::", 1)[1].strip() for c in PROJECT["classifiers"]
                if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    assert versions and all(tuple(map(int, v.split("."))) >= (3, 11) for v in versions)
    assert "Python ≥ 3.11" in (ROOT / "README.md").read_text()
    assert "(3, 11)" in (ROOT / "Makefile").read_text()
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        claimed = re.findall(r"Python\s*(?:≥|>=)\s*3\.(\d+)", doc.read_text())
        assert all(int(minor) >= 11 for minor in claimed), (doc, claimed)


def test_import_on_an_older_python_fails_with_the_reason():
    """Run from a source checkout on 3.10, ``import tir_envs`` says why, before any other
    import can fail with an obscure ``AttributeError``."""
    code = ("import sys; sys.version_info = (3, 10, 14, 'final', 0); "
            "sys.version = '3.10.14 (fake)'\nimport tir_envs")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 1
    assert "ImportError: tir_envs needs Python >= 3.11, this is 3.10.14" in out.stderr


def test_license_is_an_spdx_expression_with_its_file():
    """setuptools deprecates the ``{text = ...}`` table; the SPDX string and the file replace it."""
    assert PROJECT["license"] == "Apache-2.0"
    for name in PROJECT["license-files"]:
        assert "Apache License" in (ROOT / name).read_text()[:200]


def test_the_perf_scripts_are_not_shipped():
    """``benchmarks/perf/`` measures a checkout (``make perf`` runs its scripts by path); the
    installed distribution ships ``benchmarks`` without it."""
    from setuptools import find_packages

    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"]["find"]
    shipped = find_packages(str(ROOT), include=found["include"], exclude=found["exclude"])
    assert "benchmarks" in shipped and "tir_envs" in shipped
    assert not [name for name in shipped if name.startswith("tir_envs.bench.perf")]


def test_a_foreign_benchmarks_package_is_named_not_obeyed(tmp_path):
    """``benchmarks`` is a generic top-level name: another distribution's package earlier on
    ``sys.path`` must not silently become ``tir-envs bench``."""
    foreign = tmp_path / "benchmarks"
    foreign.mkdir()
    (foreign / "__init__.py").write_text("")
    (foreign / "cli.py").write_text("def add_parser(subparsers):\n    pass\n")
    code = f"import sys; sys.path[:0] = [{str(tmp_path)!r}, {str(ROOT)!r}]\nimport tir_envs.cli"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 1
    assert "another installed package named 'benchmarks' shadows it" in out.stderr
