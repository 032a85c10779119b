"""A user's own env in its own file, ``units.py``, as a new user writes it from
``docs/write_an_env.md``: registered with ``gymnasium.register``, never added to the project's
``ENV_SPECS``.  Tests write it into a temporary folder and run the CLI from there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV_ID = "demo/Units-v0"

UNITS_PY = r'''
import re

import gymnasium as gym

from tir_envs import TIREnv
from tir_envs.formats import TagsFormat, TagSpec
from tir_envs.protocols import Budgets, Protocol
from tir_envs.rewards.base import RewardResult
from tir_envs.tools.base import Tool, ToolResult, Status

FACTORS = {"km": 1000, "m": 1, "cm": 0.01}


class ConvertTool(Tool):
    name = "convert"

    async def call(self, arguments, session=None):
        m = re.fullmatch(r"\s*(\d+)\s*(km|m|cm)\s*", arguments.get("body", ""))
        if not m:
            return ToolResult("Error: write <convert>3 km</convert>", Status.ERROR)
        return ToolResult(str(int(m[1]) * FACTORS[m[2]]))


class UnitsProtocol(Protocol):
    name = "units"
    budgets = Budgets(max_turns=3, max_obs_tokens=64, max_total_tokens=1024)

    def __init__(self):
        super().__init__(
            TagsFormat([TagSpec(tag="convert", tool="convert", argument="body",
                                result_tag="value")]),
            system_prompt="Convert to metres. Use <convert>AMOUNT UNIT</convert>; answer "
                          "with <m>value</m>.")

    def render_answer(self, text):
        return f"<m>{text}</m>"

    def answer(self, state):
        found = re.findall(r"<m>(.*?)</m>", state.actions[-1], re.DOTALL)
        last = found[-1].strip() if found else None
        return last if last and re.fullmatch(r"-?\d+", last) else None


def exact_reward(task, trajectory, answer):
    correct = answer == str(task.answer)
    return RewardResult(float(correct), {"correct": float(correct)}, correct=correct,
                        answered=answer is not None)


TASKS = [{"id": "u0", "question": "3 km in metres?", "answer": 3000},
         {"id": "u1", "question": "4 km in metres?", "answer": 4000},
         {"id": "u2", "question": "7 m in metres?", "answer": 7}]


class UnitsEnv(TIREnv):
    env_id = "demo/Units-v0"

    def __init__(self, tasks=None, **kwargs):
        kwargs.setdefault("reward", exact_reward)
        super().__init__(protocol=UnitsProtocol(), tools=[ConvertTool()],
                         tasks=TASKS if tasks is None else tasks, **kwargs)


gym.register("demo/Units-v0", entry_point=UnitsEnv)
'''


def write_units(folder: Path) -> Path:
    """``units.py`` (the env), ``actions.json`` (a scripted policy answering 3000) and
    ``units.jsonl`` (tasks) in ``folder``."""
    (folder / "units.py").write_text(UNITS_PY)
    (folder / "actions.json").write_text(json.dumps(["<convert>3 km</convert>", "<m>3000</m>"]))
    (folder / "units.jsonl").write_text("".join(
        json.dumps(t) + "\n" for t in [{"id": "a", "question": "3 km?", "answer": "3000"},
                                       {"id": "b", "question": "5 km?", "answer": "5000"}]))
    return folder


def cli(folder: Path, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``tir-envs ARGV`` in ``folder`` as a console script runs: ``-P`` keeps the working
    directory off ``sys.path`` (``python -m`` would put it there), the project on
    ``PYTHONPATH``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-P", "-m", "tir_envs.cli", *argv], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=timeout)
