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


def test_the_wheel_ships_trainers_and_bench_under_tir_envs_only(tmp_path):
    """Installed, ``trainers/`` and ``benchmarks/`` live under the ``tir_envs`` name (two links in
    the checkout point there): a wheel built from the tracked files has ``tir_envs.trainers`` and
    ``tir_envs.bench`` as real files, no top-level package another project could collide with,
    and not ``benchmarks/perf`` (``make perf`` measures a checkout)."""
    import zipfile

    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    src = tmp_path / "src"
    for name in filter(None, files):
        origin, copy = ROOT / name, src / name
        copy.parent.mkdir(parents=True, exist_ok=True)
        if origin.is_symlink():
            copy.symlink_to(origin.readlink())
        elif origin.is_file():
            copy.write_bytes(origin.read_bytes())
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp_path / "dist"), str(src)], check=True, capture_output=True,
                   timeout=600)
    [wheel] = (tmp_path / "dist").glob("tir_envs-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"tir_envs"}
    assert "tir_envs/trainers/grpo/trainer.py" in names
    assert "tir_envs/bench/cli.py" in names
    assert "tir_envs/trainers/grpo/configs/toy.yaml" in names
    assert not [name for name in names if name.startswith("tir_envs/bench/perf")]


def test_a_foreign_benchmarks_package_cannot_shadow_tir_envs_bench(tmp_path):
    """``benchmarks`` is a generic top-level name; ours is ``tir_envs.bench``, so another
    distribution's ``benchmarks`` earlier on ``sys.path`` changes nothing."""
    foreign = tmp_path / "benchmarks"
    foreign.mkdir()
    (foreign / "__init__.py").write_text("raise ImportError('the foreign package was imported')")
    code = (f"import sys; sys.path[:0] = [{str(tmp_path)!r}, {str(ROOT)!r}]\n"
            "import tir_envs.cli; print(tir_envs.cli.SUBCOMMANDS['bench'].__name__)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "tir_envs.bench.cli"
