"""SQL tool on DuckDB: read-only databases, a safe executor, compact result tables, schemas.

``SQLTool`` is the ``sql`` tool of ``tir/SQL-v0``; ``open_database`` gives the shared,
read-only ``SQLDatabase`` for a SQLite or DuckDB file; ``run_query`` runs one statement with
a time limit; ``render_table`` and ``render_schema`` make the text the policy reads.
"""

from tir_envs.tools.sql.database import EngineSettings, SQLDatabase, open_database
from tir_envs.tools.sql.executor import QueryResult, run_query
from tir_envs.tools.sql.schema import SchemaStyle, render_schema
from tir_envs.tools.sql.table import render_table
from tir_envs.tools.sql.tool import ResultLimits, SQLTool

__all__ = ["EngineSettings", "SQLDatabase", "open_database", "QueryResult", "run_query",
           "SchemaStyle", "render_schema", "render_table", "ResultLimits", "SQLTool"]
