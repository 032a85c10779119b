"""``tir/SQL-v0``: text-to-SQL with a live database, the SkyRL-SQL / VerlTool VT-SQL setting.

The policy sees the schema (CREATE TABLE statements with sample rows) and the question, runs
``<sql>…</sql>`` queries against a read-only DuckDB copy of the database, reads the results in
``<observation>…</observation>`` (with a reminder of the turns left), and ends with
``<solution>…</solution>``, scored by execution match against the gold query
(``tir_envs.rewards.sql``).  With no arguments: the bundled Qwen2.5 tokenizer and the 972
shipped Spider dev questions over their 19 databases; max 5 turns, 5 s per query (SkyRL-SQL's
defaults).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Sequence

from tir_envs.data.task import Task
from tir_envs.env import TIREnv
from tir_envs.formats.base import ToolCall
from tir_envs.rewards.base import RewardResult
from tir_envs.rewards.sql import SQLReward, task_database
from tir_envs.tools.sql.database import EngineSettings, SQLDatabase, open_database
from tir_envs.tools.sql.protocol import SQL_PROMPT_TEMPLATE, SQLFormat
from tir_envs.tools.sql.schema import SchemaStyle, render_schema
from tir_envs.tools.sql.tool import ResultLimits, SQLTool
from tir_envs.trajectory import Trajectory

__all__ = ["SQLEnv", "SQL_PROMPT_TEMPLATE"]


class SQLEnv(TIREnv):
    """Text-to-SQL environment (see the module docstring).

    ``tasks``: ``Task``s whose ``answer`` is the gold SQL and ``meta['db_path']`` the database
    (``None``: shipped Spider dev).  ``query_timeout_s`` bounds each ``<sql>`` query;
    ``limits`` caps what an observation shows; ``schema_style`` how many sample rows the
    prompt shows; ``reward`` scores the solution (default ``SQLReward()``: 1 / 0 / -1 for
    correct / wrong / malformed); ``engine`` and ``cache_dir`` set DuckDB threads, memory
    and where converted databases are kept.  ``prompt_template`` takes ``{schema}``,
    ``{question}``, ``{max_turns}`` and ``{max_rows}``.
    """

    env_id = "tir/SQL-v0"

    def __init__(
        self,
        tokenizer: Any = None,
        tasks: Sequence[Any] | None = None,
        max_turns: int = 5,
        query_timeout_s: float = 5.0,
        limits: ResultLimits = ResultLimits(),
        schema_style: SchemaStyle = SchemaStyle(),
        reward: SQLReward | None = None,
        prompt_template: str = SQL_PROMPT_TEMPLATE,
        engine: EngineSettings = EngineSettings(),
        cache_dir: str | os.PathLike | None = None,
        max_obs_tokens: int = 2048,
        max_total_tokens: int = 16384,
        **kwargs: Any,
    ):
        if "tool_format" in kwargs or "tools" in kwargs:
            raise ValueError("SQLEnv speaks the <sql>/<solution> protocol with its own sql "
                             "tool; configure it with query_timeout_s=..., limits=...")
        missing = [k for k in ("{schema}", "{question}") if k not in prompt_template]
        if missing:
            raise ValueError(f"prompt_template must contain {' and '.join(missing)}")
        if tasks is None:
            from tir_envs.data.spider import load_spider
            tasks = load_spider()
        self.engine, self.cache_dir = engine, cache_dir
        self.sql_tool = SQLTool(timeout_s=query_timeout_s, limits=limits)
        self.reward_fn = reward or SQLReward()
        self.schema_style = schema_style
        self.prompt_template = prompt_template
        self._scored: tuple[str, RewardResult] | None = None  # see astep
        super().__init__(tokenizer=tokenizer, tasks=tasks, tool_format=SQLFormat(),
                         tools=[self.sql_tool], max_turns=max_turns, max_calls_per_turn=1,
                         max_obs_tokens=max_obs_tokens, max_total_tokens=max_total_tokens,
                         **kwargs)

    # -------------------------------------------------------------- wiring
    def database(self, task: Task) -> SQLDatabase:
        """The task's database, opened with this env's engine settings."""
        return open_database(task_database(task), self.engine, self.cache_dir)

    def user_message(self, task: Task) -> str:
        return self.prompt_template.format(
            schema=render_schema(self.database(task), self.schema_style),
            question=task.question.strip(), max_turns=self.max_turns,
            max_rows=self.sql_tool.limits.max_rows)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._scored = None
        obs, info = super().reset(seed=seed, options=options)
        self.sql_tool.bind(self.database(self.task))
        info["db_id"] = self.task.meta.get("db_id", "")
        return obs, info

    # -------------------------------------------------------------- protocol
    def is_final(self, action_text: str, calls: list[ToolCall]) -> bool:
        """The action gave a ``<solution>``."""
        return self.format.has_solution(action_text)

    def observation_text(self, calls: list[ToolCall], texts: list[str], action_text: str) -> str:
        turns_left = self.max_turns - len(self.trajectory.turns)
        body = self.format.render_turn(texts, turns_left)
        return self.wrap_in_chat(body, action_text) if self._glue else body

    async def astep(self, action: Any):
        """Async twin of ``step``.  A final ``<solution>`` is scored on a worker thread before
        the step, so a slow prediction (up to the reward's time limit) never blocks the event
        loop that drives the other episodes."""
        text = None if self._done else self._peek_text(action)
        if text is not None and self.format.has_solution(text):
            task, db = self.task, self.database(self.task)
            result = await asyncio.to_thread(self.reward_fn, task, self.trajectory, [text], db)
            self._scored = (text, result)
        return await super().astep(action)

    def _peek_text(self, action: Any) -> str | None:
        """The action's text, or ``None`` if it is malformed (``step`` then says why)."""
        if isinstance(action, dict):
            action = action.get("tokens")
        if isinstance(action, str):
            return action
        try:
            return self.codec.decode([int(i) for i in action])
        except Exception:  # noqa: BLE001 - validation and its message belong to step
            return None

    def outcome(self, task: Task, trajectory: Trajectory, actions: list[str]) -> RewardResult:
        scored, self._scored = self._scored, None
        if scored is not None and actions and scored[0] == actions[-1]:
            result = scored[1]  # computed by astep off the event loop
        else:
            result = self.reward_fn(task, trajectory, actions, self.database(task))
        if result.components.get("gold_error"):
            trajectory.infra_failed = True
            trajectory.metadata["gold_error"] = True
        return result
