"""``SQLTool``: the ``sql`` tool, one read-only connection per episode to the task's database.

The tool object holds only configuration (time limit, result caps, engine, where databases
are): ``open_session(task)`` opens a connection to that task's own database
(``task.meta['db_path']``, or ``meta['db_id']`` in the databases folder) with its engine
(SQLite for a SQLite file unless ``engine="duckdb"``), and ``close_session`` closes it.  Queries
run on a worker thread (both engines release the GIL while they work), so many episodes can
query at once from one event loop.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any

from tir_envs.tools.base import Tool, ToolResult, Status
from tir_envs.data.databases import task_database_path
from tir_envs.tools.sql.database import (EngineSettings, SQLDatabase, check_engine,
                                         open_database)
from tir_envs.tools.sql.executor import QueryResult, run_query
from tir_envs.tools.sql.table import render_table
from tir_envs.validation import check_positive_int

_STATUS = {"ok": Status.OK, "error": Status.ERROR, "refused": Status.ERROR,
           "timeout": Status.TIMEOUT}


@dataclass(frozen=True)
class ResultLimits:
    """What an observation may hold.  ``count_rows``: rows fetched to report the total."""

    max_rows: int = 50
    max_chars: int = 4000
    max_cell_chars: int = 100
    count_rows: int = 1000

    def __post_init__(self) -> None:
        check_positive_int(max_rows=self.max_rows, max_chars=self.max_chars,
                           max_cell_chars=self.max_cell_chars, count_rows=self.count_rows)


class SQLTool(Tool):
    """Runs the policy's ``<sql>`` queries; results come back as a compact table.

    ``timeout_s`` stops a statement (default 5 s, as SkyRL-SQL and VerlTool); ``limits`` caps
    what an observation shows; ``engine``: ``None`` (each database's own dialect), ``"sqlite"``
    or ``"duckdb"``; ``db_dir``: the databases folder for tasks that give only ``db_id``;
    ``settings``/``cache_dir``: DuckDB's threads and memory, and where SQLite files converted
    for ``engine="duckdb"`` are kept.  Errors, refused statements and timeouts are
    observations with a status, never exceptions.
    """

    name = "sql"

    def __init__(self, timeout_s: float = 5.0, limits: ResultLimits = ResultLimits(), *,
                 engine: str | None = None, db_dir: "str | os.PathLike | None" = None,
                 settings: EngineSettings | None = None,
                 cache_dir: "str | os.PathLike | None" = None):
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
        self.timeout_s = timeout_s
        self.limits = limits
        self.engine = check_engine(engine)
        self.db_dir, self.settings, self.cache_dir = db_dir, settings, cache_dir

    def database_for(self, task: Any) -> SQLDatabase:
        """The database (with this tool's engine) a task's episode queries."""
        return open_database(task_database_path(task, self.db_dir), self.settings,
                             self.cache_dir, engine=self.engine)

    async def open_session(self, task: Any = None) -> Any:
        """A new connection to ``task``'s database (one per episode)."""
        if task is None:
            raise RuntimeError("SQLTool.open_session needs the episode's task (its "
                               "meta['db_path'] or meta['db_id'] names the database)")
        db = self.database_for(task)
        return await asyncio.to_thread(db.connect)

    async def close_session(self, session: Any) -> None:
        if session is not None:
            session.close()

    async def call(self, arguments: dict[str, Any], session: Any = None) -> ToolResult:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return ToolResult("Error: the <sql> block is empty; write one SELECT query in it.",
                              Status.ERROR)
        result = await asyncio.to_thread(self.run, query, session)
        return ToolResult(self.render(result), _STATUS[result.status], result.elapsed_s,
                          {"sql_status": result.status, "rows": len(result.rows),
                           "more_rows": result.more_rows})

    def run(self, query: str, session: Any) -> QueryResult:
        """Run one query on ``session`` (a cursor) with this tool's limits."""
        return run_query(session, query, timeout_s=self.timeout_s,
                         max_rows=max(self.limits.max_rows, self.limits.count_rows))

    def render(self, result: QueryResult) -> str:
        """The observation text of one query's outcome."""
        lim = self.limits
        if not result.ok:
            why = "statement refused: " if result.status == "refused" else ""
            text = f"Error: {why}{result.error}"
            return text if len(text) <= lim.max_chars else text[:lim.max_chars - 1] + "…"
        return render_table(result.columns, result.rows, more_rows=result.more_rows,
                            max_rows=lim.max_rows, max_chars=lim.max_chars,
                            max_cell_chars=lim.max_cell_chars)
