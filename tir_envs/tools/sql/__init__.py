"""SQL tool in the database's own dialect: SQLite for SQLite files, DuckDB for DuckDB/Parquet/CSV.

``SQLTool`` is the ``sql`` tool of ``tir/SQL-v0`` (one read-only connection per episode, opened
from the task); ``describe_database`` gives the engine name and schema text for the prompt;
``open_database`` gives the shared ``SQLDatabase`` for a file and engine; ``run_query`` runs one
statement with a time limit on either engine; ``render_table`` and ``render_schema`` make the
text the policy reads.
"""

from tir_envs.data.databases import find_database, task_database_path
from tir_envs.tools.sql.database import ENGINE_NAMES, EngineSettings, SQLDatabase, open_database
from tir_envs.tools.sql.executor import run_query
from tir_envs.tools.sql.result import QueryResult
from tir_envs.tools.sql.schema import SchemaStyle, describe_database, render_schema
from tir_envs.tools.sql.table import render_table
from tir_envs.tools.sql.tool import ResultLimits, SQLTool

__all__ = ["ENGINE_NAMES", "EngineSettings", "SQLDatabase", "find_database", "open_database",
           "task_database_path", "QueryResult", "run_query", "SchemaStyle",
           "describe_database", "render_schema", "render_table", "ResultLimits", "SQLTool"]
