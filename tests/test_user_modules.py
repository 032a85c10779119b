"""Issue 47 item 2: one lookup rule for the user's modules (``tir_envs.user_modules``): the
working folder first, as ``python -m`` has it, then ``PYTHONPATH``; for ``--import`` on every
subcommand (``serve openenv`` included), ``tools=["module:function"]`` strings, OpenEnv's
``app=`` and string entry points."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request

import gymnasium as gym
import pytest

from tests.user_env_helpers import ENV_ID, ROOT, write_units
from tir_envs.user_modules import UserModuleError, resolve

MY_TOOLS = '''
def capital(country: str) -> str:
    """The capital of a country."""
    return {"France": "Paris"}.get(country, "unknown")
'''


@pytest.fixture()
def here(tmp_path, monkeypatch):
    """A fresh folder as the working folder, off ``sys.path`` (as a console script runs)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    (tmp_path / "my_tools.py").write_text(MY_TOOLS)
    yield tmp_path
    for name in ("my_tools", "units"):
        sys.modules.pop(name, None)
    gym.registry.pop(ENV_ID, None)


def test_a_tools_string_finds_a_module_in_the_working_folder(here):
    from tir_envs.envs.tool_use import resolve_tool_spec

    assert resolve_tool_spec("my_tools:capital")("France") == "Paris"


def test_every_module_name_string_follows_the_rule(here):
    from tir_envs.trainers.grpo.modeling import import_object

    assert import_object("my_tools:capital")("France") == "Paris"
    assert resolve("my_tools:capital", "app=")("x") == "unknown"
    assert sys.path[0] == str(here)  # first, as python -m puts it


def test_a_string_entry_point_is_found_in_the_working_folder(here):
    from tir_envs.registry import env_class

    write_units(here)
    gym.register("demo/UnitsByName-v0", entry_point="units:UnitsEnv")
    try:
        assert env_class("demo/UnitsByName-v0").__name__ == "UnitsEnv"
    finally:
        gym.registry.pop("demo/UnitsByName-v0", None)


def test_a_missing_module_is_named_with_the_folders_searched_and_the_fix(here):
    with pytest.raises(UserModuleError, match=r"tools= nope_mod: cannot import it.*working "
                                              rf"folder \({here}\) first.*PYTHONPATH"):
        resolve("nope_mod:f", "tools=")
    with pytest.raises(UserModuleError, match="has no attribute 'nope'"):
        resolve("my_tools:nope", "tools=")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_openenv_imports_the_users_module_from_its_folder(tmp_path):
    """``tir-envs serve openenv MINE --import units`` run from the folder holding units.py, as
    the console script runs it (``-P``: the working folder is not on ``sys.path``)."""
    pytest.importorskip("openenv")
    folder = write_units(tmp_path)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", "tir_envs.cli", "serve", "openenv", ENV_ID, "--import",
         "units", "--port", str(port)], cwd=folder,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    assert r.status == 200
                    break
            except OSError:
                time.sleep(0.3)
        else:
            pytest.fail(f"serve openenv did not serve: {proc.communicate(timeout=10)}")
    finally:
        proc.terminate()
        proc.wait(20)
