"""``tir/SQL-v0``: text-to-SQL with a live database, the SkyRL-SQL / VerlTool VT-SQL setting.

The policy sees the schema (CREATE TABLE statements with sample rows), the engine and the
question, runs ``<sql>…</sql>`` queries against a read-only connection to the task's database
in its own dialect (SQLite for Spider/BIRD files, DuckDB for DuckDB/Parquet/CSV), reads the
results in ``<observation>…</observation>`` (with a reminder of the turns left), and ends with
``<solution>…</solution>``, scored by execution match against the gold query on the same engine
(``tir_envs.rewards.sql``).  With no arguments: the bundled Qwen2.5 tokenizer and the 972
shipped Spider dev questions over their 19 databases; max 5 turns, 5 s per query (SkyRL-SQL's
defaults).  Protocol: ``tir_envs.protocols.skyrl_sql``.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from tir_envs.data.spider import load_spider, load_sql_file
from tir_envs.env import TIREnv, reject_wiring
from tir_envs.protocols.skyrl_sql import SQL_PROMPT_TEMPLATE, SkyRLSQLProtocol
from tir_envs.rewards.sql import SQLReward
from tir_envs.task import Task
from tir_envs.tools.sql.database import EngineSettings
from tir_envs.tools.sql.schema import SchemaStyle, render_schema
from tir_envs.tools.sql.tool import ResultLimits, SQLTool

__all__ = ["SQLEnv", "SQL_PROMPT_TEMPLATE"]


class SQLEnv(TIREnv):
    """Text-to-SQL environment (see the module docstring).

    ``tasks``: ``Task``s whose ``answer`` is the gold SQL and ``meta['db_path']`` (or
    ``meta['db_id']`` under ``db_dir``) the database; a JSONL path; or ``"spider"`` (default).
    ``engine``: ``None`` (each database's own dialect), ``"sqlite"`` or ``"duckdb"``.
    ``tool_timeout_s`` bounds each ``<sql>`` query; ``limits`` caps what an observation shows;
    ``schema_style`` how many sample rows the prompt shows; ``reward`` scores the solution
    (default ``SQLReward()``: 1 / 0 / -1 for correct / wrong / malformed); ``settings`` and
    ``cache_dir`` set DuckDB threads and memory, and where converted databases are kept.
    ``prompt_template`` takes ``{engine}``, ``{schema}``, ``{question}``, ``{max_turns}`` and
    ``{max_rows}``.
    """

    env_id = "tir/SQL-v0"
    default_tasks = "spider"
    scoring = "sql"

    def __init__(
        self,
        tokenizer: Any = None,
        tasks: Any = None,
        engine: str | None = None,
        db_dir: str | os.PathLike | None = None,
        tool_timeout_s: float = 5.0,
        limits: ResultLimits = ResultLimits(),
        schema_style: SchemaStyle = SchemaStyle(),
        reward: SQLReward | None = None,
        prompt_template: str = SQL_PROMPT_TEMPLATE,
        settings: EngineSettings | None = None,
        cache_dir: str | os.PathLike | None = None,
        max_turns: int | None = None,
        **kwargs: Any,
    ):
        reject_wiring(kwargs, "SQLEnv", "It speaks <sql>/<solution> with its own sql tool; "
                      "configure it with engine=, tool_timeout_s=, limits=.")
        self.db_dir = db_dir
        self.sql_tool = SQLTool(timeout_s=tool_timeout_s, limits=limits, engine=engine,
                                db_dir=db_dir, settings=settings, cache_dir=cache_dir)
        self.schema_style = schema_style
        protocol = SkyRLSQLProtocol(self.describe, limits.max_rows, prompt_template,
                                    max_turns=max_turns)
        # graded on the databases the tool opened: the engine the policy queried
        super().__init__(tokenizer=tokenizer, tasks=tasks, protocol=protocol,
                         tools=[self.sql_tool],
                         reward=(reward or SQLReward()).on_databases(self.sql_tool.database_for),
                         max_turns=max_turns, max_calls_per_turn=1, **kwargs)

    def load_tasks(self, source: str) -> Sequence[Any]:
        return load_spider() if source == "spider" else load_sql_file(source, self.db_dir)

    def describe(self, task: Task) -> tuple[str, str]:
        """The engine's name and the schema text of ``task``'s database, for the prompt."""
        db = self.sql_tool.database_for(task)
        return db.engine_name, render_schema(db, self.schema_style)

    def episode_info(self) -> dict[str, Any]:
        return {**super().episode_info(), "db_id": self.task.meta.get("db_id", "")}
