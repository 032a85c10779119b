"""The project's tools as an MCP server: ``tir-envs serve mcp [--tools python,search,sql]``.

Any MCP client (an agent framework, a trainer that speaks MCP) gets the sandboxed Python
interpreter, the retriever and the read-only SQL databases, with what makes them fit for RL
intact:

* **one tool session per MCP session**: each client connection gets its own interpreter (and
  its own database connections), opened on its first call and closed when the connection ends
  (or when the server stops), so two clients never see each other's variables;
* **host-observed statuses**: every result carries ``{"status": "ok" | "error" | "timeout" |
  "killed" | "infra_error"}`` in its structured content, and ``isError`` is set for every
  status but ``ok``.  The status is the tool's (the sandbox host's), never read from the text.

``sql`` takes ``query`` and ``database``: a name from the server's catalog (the shipped Spider
databases, or ``--sql-db NAME=PATH``), never a path the client chooses.

(No ``from __future__ import annotations`` here: the SDK reads the tool functions' hints,
which name classes imported inside ``build_server``.)
"""


import asyncio
import time
import weakref
from pathlib import Path
from typing import Any, Mapping

from tir_envs.task import Task
from tir_envs.tools.base import Tool, ToolResult

from tir_envs.envs.tooling import DEFAULT_TIMEOUTS, SHIPPED_TOOLS, shipped_tool

SERVABLE = tuple(SHIPPED_TOOLS)


class Busy(Exception):
    """Every session slot of the server is taken by an active client."""


class SessionTable:
    """Tool sessions per MCP session: opened lazily, closed when the MCP session object goes
    away (its connection ended), when it has been idle ``idle_s`` seconds, or at
    ``close_all``.  At most ``max_owners`` MCP sessions hold tool sessions at once."""

    def __init__(self, tools: Mapping[str, Tool], max_owners: int = 32,
                 idle_s: float | None = None):
        self.tools = dict(tools)
        self.max_owners, self.idle_s = max_owners, idle_s
        self._open: dict[int, dict[Any, Any]] = {}
        self._last: dict[int, float] = {}

    async def session(self, owner: Any, tool: str, key: Any = None, task: Task | None = None):
        """The tool session of ``tool`` (and ``key``, e.g. a database) for MCP session
        ``owner``, opened on first use (``Busy`` when ``max_owners`` others hold theirs)."""
        now = time.monotonic()
        await self._reap(now)
        table = self._open.get(id(owner))
        if table is None and len(self._open) >= self.max_owners:
            raise Busy(f"the server holds {self.max_owners} sessions already; try again later")
        self._last[id(owner)] = now
        if table is None:
            table = self._open[id(owner)] = {}
            loop = asyncio.get_running_loop()
            try:
                weakref.finalize(owner, self._on_gone, loop, id(owner))
            except TypeError:  # not weak-referenceable: closed at close_all
                pass
        if (tool, key) not in table:
            table[(tool, key)] = await self.tools[tool].open_session(task)
        return table[(tool, key)]

    def _on_gone(self, loop: asyncio.AbstractEventLoop, owner_id: int) -> None:
        if not loop.is_closed():
            loop.call_soon_threadsafe(lambda: loop.create_task(self.close_owner(owner_id)))

    async def _reap(self, now: float) -> None:
        if self.idle_s is None:
            return
        for owner_id, last in list(self._last.items()):
            if now - last > self.idle_s:
                await self.close_owner(owner_id)

    async def close_owner(self, owner_id: int) -> None:
        self._last.pop(owner_id, None)
        for (tool, _), session in self._open.pop(owner_id, {}).items():
            try:
                await self.tools[tool].close_session(session)
            except Exception:  # noqa: BLE001 - one failing close must not stop the others
                pass

    @property
    def open_owners(self) -> int:
        return len(self._open)

    async def close_all(self) -> None:
        for owner_id in list(self._open):
            await self.close_owner(owner_id)


def build_tools(names: list[str], *, timeout_s: float | None = None, backend: str = "local",
                retriever: Any = None) -> dict[str, Tool]:
    """The project's tools by name, built as the envs build them (``SHIPPED_TOOLS``)."""
    unknown = sorted(set(names) - set(SERVABLE))
    if unknown or not names:
        raise SystemExit(f"--tools {','.join(names)!r}: choose from {', '.join(SERVABLE)}")
    return {name: shipped_tool(name, timeout_s or DEFAULT_TIMEOUTS[name], backend=backend,
                               retriever=retriever) for name in names}


def result_of(result: ToolResult) -> Any:
    """An MCP ``CallToolResult`` carrying the text and the host-observed status."""
    from mcp.types import CallToolResult, TextContent
    return CallToolResult(content=[TextContent(type="text", text=result.text)],
                          structured_content={"status": result.status.value,
                                              "latency_s": round(result.latency_s, 6)},
                          is_error=not result.ok)


def build_server(tools: Mapping[str, Tool], databases: Mapping[str, Path] | None = None,
                 name: str = "tir-envs", max_owners: int = 32,
                 idle_s: float | None = None) -> tuple[Any, SessionTable]:
    """An ``MCPServer`` offering ``tools`` (see the module docstring), and its session table."""
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.types import CallToolResult

    table = SessionTable(tools, max_owners, idle_s)
    server = MCPServer(name, instructions="Sandboxed tools of tir-envs; every result carries "
                       "its host-observed status in structuredContent.status.")
    if "python" in tools:
        @server.tool(description="Run Python code in this connection's own sandboxed "
                                 "interpreter (variables persist between calls) and return "
                                 "what it prints, or the error.")
        async def python(code: str, ctx: Context) -> CallToolResult:
            return await _guarded_call(table, ctx, "python", {"code": code})

    if "search" in tools:
        @server.tool(description="Search the corpus; returns the top documents.")
        async def search(query: str, ctx: Context) -> CallToolResult:
            return await _guarded_call(table, ctx, "search", {"query": query})

    if "sql" in tools:
        catalog = dict(databases or _spider_catalog())

        @server.tool(description="Run one read-only SQL query on a database of the catalog "
                                 f"({', '.join(sorted(catalog))}) and return the rows.")
        async def sql(query: str, database: str, ctx: Context) -> CallToolResult:
            if database not in catalog:
                return result_of(ToolResult(f"Error: unknown database {database!r}; choose "
                                            f"from {', '.join(sorted(catalog))}",
                                            _error_status()))
            task = Task(id=database, question="", meta={"db_path": str(catalog[database])})
            return await _guarded_call(table, ctx, "sql", {"query": query}, database, task)
    return server, table


async def _guarded_call(table: SessionTable, ctx: Any, tool: str, arguments: dict[str, Any],
                        key: Any = None, task: Task | None = None) -> Any:
    """One call in the client's own session; a full server answers, it never raises."""
    try:
        session = await table.session(connection_of(ctx), tool, key, task)
    except Busy as exc:
        return result_of(ToolResult.infra(str(exc)))
    return result_of(await table.tools[tool].call(arguments, session))


def connection_of(ctx: Any) -> Any:
    """The object that lives as long as the client's MCP session: the SDK's per-connection
    state.  ``ServerSession`` is a per-request view of it in mcp 2.x, and the SDK offers no
    public way from a tool's ``Context`` to the connection (``Context.connection`` exists only
    on the low-level context), so this reads ``ServerSession._connection``, private to the
    pinned ``mcp`` (``>=2.3,<3``).  If a release moves it this raises, naming the pin, rather
    than keying sessions per request (which would lose every variable between two calls);
    ``tests/test_private_apis.py`` checks it against the installed SDK."""
    session = ctx.session
    connection = getattr(session, "_connection", None)
    if connection is None:
        from tir_envs.validation import private_api_moved
        raise RuntimeError(private_api_moved("mcp", "ServerSession._connection",
                                             "one tool session per MCP connection"))
    return connection


def _error_status():
    from tir_envs.tools.base import Status
    return Status.ERROR


def _spider_catalog() -> dict[str, Path]:
    from tir_envs.data.spider import spider_databases
    return spider_databases()
