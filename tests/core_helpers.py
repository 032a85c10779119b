"""Small tools and envs used by the core tests (real TIREnv, trivial tools)."""

from __future__ import annotations

from tir_envs.env import TIREnv
from tir_envs.rewards.base import RewardResult
from tir_envs.tools.base import Tool, ToolResult, Status


class EchoTool(Tool):
    """Returns a fixed or echoed text; counts sessions to check they are always closed."""

    name = "python"

    def __init__(self, reply: str | None = None, status: Status = Status.OK):
        self.reply, self.status = reply, status
        self.opened = self.closed = 0

    async def open_session(self, task=None):
        self.opened += 1
        return {"calls": 0}

    async def call(self, arguments, session=None):
        session["calls"] += 1
        text = self.reply if self.reply is not None else f"echo:{arguments.get('code', '')}"
        return ToolResult(text, self.status)

    async def close_session(self, session):
        self.closed += 1


class CrashTool(EchoTool):
    async def call(self, arguments, session=None):
        raise ConnectionError("backend down")


def contains_gold(task, trajectory, answer):
    """1 when the answer holds the task's gold anywhere."""
    hit = answer is not None and str(task.answer) in answer
    return RewardResult(1.0 if hit else 0.0, {"correct": float(hit)})


class AnswerEnv(TIREnv):
    """Reward 1 when the final action contains the task's answer (the whole final action is
    the answer, whatever the tool-call format)."""

    env_id = "test/Answer"

    def __init__(self, **kwargs):
        kwargs.setdefault("reward", contains_gold)
        super().__init__(**kwargs)

    def answer(self):
        return self.actions[-1] if self.actions else None
