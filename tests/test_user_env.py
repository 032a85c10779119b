"""Issue 36 item 1: a user's env registered with ``gymnasium.register`` is first-class:
``tir_envs.make`` and ``collect`` take its id, and ``rollout``, ``bench`` and ``audit`` run it
from the command line with ``--import``, from the folder holding its module."""

from __future__ import annotations

import importlib
import json
import sys

import gymnasium as gym
import pytest

import tir_envs
from tests.user_env_helpers import ENV_ID, cli, write_units
from tir_envs.trajectory import read_jsonl


@pytest.fixture()
def units(tmp_path, monkeypatch):
    folder = write_units(tmp_path)
    monkeypatch.syspath_prepend(str(folder))
    sys.modules.pop("units", None)
    module = importlib.import_module("units")
    yield folder, module
    gym.registry.pop(ENV_ID, None)
    sys.modules.pop("units", None)


def test_make_and_collect_take_a_gymnasium_registered_id(units):
    from tir_envs.rollout import ScriptedPolicy, collect

    folder, module = units
    env = tir_envs.make(ENV_ID)
    assert isinstance(env.unwrapped, module.UnitsEnv)
    env.close()
    with pytest.raises(TypeError, match="unknown argument"):
        tir_envs.make(ENV_ID, no_such_argument=1)
    policy = ScriptedPolicy(json.loads((folder / "actions.json").read_text()))
    runs = collect(ENV_ID, policy, tasks=1, samples_per_task=2, progress=False)
    assert len(runs) == 2 and all(t.correct for t in runs)
    assert all(t.num_tool_calls == 1 for t in runs)


def test_an_unknown_id_still_lists_the_ids_and_says_how_to_add_one():
    with pytest.raises(gym.error.Error, match="--import MODULE"):
        tir_envs.make("demo/NoSuch-v0")


def test_rollout_runs_a_user_env_with_import_from_its_folder(tmp_path):
    folder = write_units(tmp_path)
    done = cli(folder, "rollout", "--env", ENV_ID, "--import", "units", "--policy",
               "scripted:actions.json", "--limit", "2", "--out", "traj.jsonl", "--no-progress")
    assert done.returncode == 0, done.stderr
    runs = read_jsonl(folder / "traj.jsonl")
    assert [t.correct for t in runs] == [True, False]  # 3 km is 3000; 4 km is not


def test_without_import_the_rollout_names_the_flag(tmp_path):
    folder = write_units(tmp_path)
    done = cli(folder, "rollout", "--env", ENV_ID, "--policy", "scripted:actions.json",
               "--out", "traj.jsonl", "--no-progress")
    assert done.returncode == 2 and "--import MODULE" in done.stderr


def test_bench_runs_a_user_env_with_import(tmp_path):
    folder = write_units(tmp_path)
    done = cli(folder, "bench", "--tasks", "units.jsonl", "--env", ENV_ID, "--scoring", "math",
               "--import", "units", "--policy", "scripted:actions.json", "--out", "run",
               "--no-progress")
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in (folder / "run/samples.jsonl").open()]
    assert sorted(r["correct"] for r in records) == [False, True]
    assert json.loads(done.stdout.splitlines()[-1])["out"] == "run"


SILENT_PY = """
import gymnasium as gym

from tir_envs import TIREnv
from tir_envs.protocols import Protocol
from units import TASKS, ConvertTool, UnitsProtocol, exact_reward


class SilentProtocol(UnitsProtocol):
    render_answer = Protocol.render_answer  # it never says how an answer is written


class SilentEnv(TIREnv):
    env_id = "demo/Silent-v0"

    def __init__(self, tasks=None, **kwargs):
        super().__init__(protocol=SilentProtocol(), tools=[ConvertTool()], reward=exact_reward,
                         tasks=TASKS if tasks is None else tasks, **kwargs)


gym.register("demo/Silent-v0", entry_point=SilentEnv)
"""


def test_bench_oracle_and_wrong_answer_a_user_env_through_its_protocol(tmp_path):
    """Issue 47.1: ``--policy oracle|wrong`` writes answers with the env's ``render_answer``, as
    ``rollout`` does; a protocol without one is refused before the run folder is made."""
    folder = write_units(tmp_path)
    common = ["--tasks", "units.jsonl", "--scoring", "math", "--import", "units",
              "--no-progress"]
    for policy, expected in (("oracle", [True, True]), ("wrong", [False, False])):
        done = cli(folder, "bench", "--env", ENV_ID, "--policy", policy, "--out", policy,
                   *common)
        assert done.returncode == 0, done.stderr
        records = [json.loads(line) for line in (folder / policy / "samples.jsonl").open()]
        assert [r["correct"] for r in records] == expected
        # the units protocol reads only a number: the fixed wrong word is no answer to it
        assert all(r["answered"] == (policy == "oracle") and r["tool_calls"] == 0
                   for r in records)
    (folder / "silent.py").write_text(SILENT_PY)
    done = cli(folder, "bench", "--env", "demo/Silent-v0", "--policy", "oracle", "--out",
               "silent", *common[:-3], "--import", "silent", "--no-progress")
    assert done.returncode != 0 and "render_answer" in done.stderr, done.stderr
    assert "scripted:FILE" in done.stderr and not (folder / "silent").exists()


def test_bench_on_a_user_env_without_scoring_says_to_pass_it(tmp_path):
    folder = write_units(tmp_path)
    done = cli(folder, "bench", "--tasks", "units.jsonl", "--env", ENV_ID, "--import", "units",
               "--policy", "scripted:actions.json", "--out", "run", "--no-progress")
    assert done.returncode != 0 and "--scoring" in done.stderr


def test_audit_runs_a_user_env_with_import(tmp_path):
    folder = write_units(tmp_path)
    done = cli(folder, "audit", ENV_ID, "--import", "units", "--tasks", "2", "--out", "audit",
               "--probe", "format", "--probe", "copy")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((folder / "audit/audit.json").read_text())
    assert report["env"] == ENV_ID and report["probes"]


def test_the_import_is_a_run_setting_recorded_for_workers(tmp_path, monkeypatch):
    """``--import`` is a ``RunConfig`` field: recorded in ``run.json`` (Ray workers import the
    modules from it), and a module that does not import is named with the fix."""
    from tir_envs.bench.config import RunConfig
    from tir_envs.bench.harness import run

    folder = write_units(tmp_path)
    monkeypatch.chdir(folder)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(folder))])
    sys.modules.pop("units", None)
    try:
        config = RunConfig(tasks="units.jsonl", env=ENV_ID, scoring="math", imports=["units"],
                           policy="scripted:actions.json", out="run", progress=False)
        run(config)
        assert json.loads((folder / "run/run.json").read_text())["imports"] == ["units"]
        with pytest.raises(ImportError, match="imports= no_such_module: .*PYTHONPATH"):
            run(config.replace(imports=("no_such_module",), out="run2"))
    finally:
        gym.registry.pop(ENV_ID, None)
        sys.modules.pop("units", None)
