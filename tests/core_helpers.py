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


class AnswerEnv(TIREnv):
    """Reward 1 when the final action contains the task's answer."""

    env_id = "test/Answer"

    def outcome(self, task, trajectory, actions):
        hit = str(task.answer) in actions[-1] if actions else False
        return RewardResult(1.0 if hit else 0.0, {"correct": float(hit)})
