"""Tools from an MCP server: ``McpTools(server=...)``, with the official ``mcp`` SDK.

``server`` is a streamable-HTTP URL (``http://host:port/mcp``) or a stdio command (a string,
split like a shell would, or a list of arguments; or an ``mcp.StdioServerParameters``).  The
connection opens when the tools are first listed (when the env is made: ``tools()``), lives on
its own event-loop thread (``LoopThread``) so every env of a pool, on any loop, shares it, and
ends with ``close()`` (or at exit): the server's life is the pool's, not an episode's.

Statuses come from what the host saw, never from the text a tool returns:

* arguments that do not fit the tool's input schema: ``ERROR`` before anything is sent, the
  same one short line a function tool gives (``Error: <tool>: <problem>``);
* the server answered, ``isError`` false: ``OK``; ``isError`` true: ``ERROR`` (the call failed:
  the tool raised);
* no answer within ``timeout_s``: ``TIMEOUT`` (the request is cancelled; the server lives on);
* a stdio server that died during the call (on this input): ``ERROR`` for this call, the one
  that killed it, and the server is restarted for the next call; an HTTP server that stopped
  answering: ``INFRA_ERROR`` (it was the host's), and it is reconnected for the next call;
* the server cannot be restarted (``max_restarts`` tries in a row, waiting 0.5 s, 1 s, 2 s...
  between them): ``INFRA_ERROR``, the host's failure; ``reconnect()`` starts over.

Everything the server writes is a third party's text: tool names must be plain identifiers
(others are skipped, with a warning), and descriptions and schemas are escaped
(``tir_envs.untrusted.escape_schema``) before any prompt shows them.

A server's tools are stateless per episode (one connection serves every episode); a tool with
per-episode state belongs in a function tool with a session (``tir_envs.tools.function``).
"""

from __future__ import annotations

import asyncio
import atexit
import os
import re
import shlex
import tempfile
import threading
import time
import warnings
import weakref
from typing import Any, Sequence

from tir_envs.tools.base import Tool, ToolResult, Status, describe_exception
from tir_envs.tools.function import MAX_RESULT_CHARS, cap
from tir_envs.tools.loop_thread import LoopThread
from tir_envs.tools.schema import check_arguments
from tir_envs.untrusted import escape_schema, escape_third_party
from tir_envs.validation import check_positive_number

_LIVE: "weakref.WeakSet[McpTools]" = weakref.WeakSet()
#: characters of the server's stderr quoted when it dies
STDERR_TAIL = 400
#: what a tool name from a server may be (a name is also what the policy writes)
TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
#: the pydantic error's "For further information visit https://errors.pydantic.dev/..." lines
_PYDANTIC_URL = re.compile(r"\n?[ \t]*For further information visit \S+")


class McpTools:
    """A connection to one MCP server and the ``Tool``s it offers (see the module docstring).

    ``include``: only these tool names (default: all).  ``timeout_s``: seconds per call;
    ``connect_timeout_s``: for connecting and listing.  ``env``/``cwd``: for a stdio command.
    """

    def __init__(self, server: Any, *, timeout_s: float = 30.0,
                 connect_timeout_s: float = 30.0, include: Sequence[str] | None = None,
                 env: dict[str, str] | None = None, cwd: str | None = None,
                 max_result_chars: int = MAX_RESULT_CHARS, max_restarts: int = 3):
        check_positive_number(unit="seconds", timeout_s=timeout_s,
                              connect_timeout_s=connect_timeout_s)
        self.server = server
        self.target = _target(server, env, cwd)
        self.timeout_s = float(timeout_s)
        self.connect_timeout_s = float(connect_timeout_s)
        self.include = list(include) if include is not None else None
        self.max_result_chars = max_result_chars
        self.max_restarts = max_restarts
        self.restarts = 0           # successful restarts after the server died
        self._failed_restarts = 0   # in a row
        self._retry_at = 0.0        # no restart try before this (time.monotonic())
        self._restart_lock = threading.Lock()
        self._closed = False
        self._thread: LoopThread | None = None
        self._client: Any = None
        self._closer: asyncio.Event | None = None
        self._owner: asyncio.Future | None = None
        self._down: str | None = None
        self._stderr = None
        self._tools: list[McpTool] | None = None
        _LIVE.add(self)

    def __repr__(self) -> str:
        return f"McpTools({self.server!r})"

    # ------------------------------------------------------------------ connection
    def tools(self) -> list["McpTool"]:
        """The server's tools (connecting and listing on first use; raises ``ConnectionError``
        naming the server when it cannot be reached)."""
        if self._tools is None:
            self._connect()
            listed = [t for t in self._thread.run(self._list(), self.connect_timeout_s)
                      if _plain_name(t.name, self.server)]
            self._tools = [McpTool(self, t) for t in listed
                           if self.include is None or t.name in self.include]
            missing = sorted(set(self.include or ()) - {t.name for t in self._tools})
            if missing:
                raise ValueError(f"include= names {missing}, which the MCP server {self.server!r}"
                                 f" does not offer; it offers {sorted(t.name for t in listed)}")
        return list(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        """The tools' function schemas (what a chat template's ``tools=`` takes)."""
        return [t.schema for t in self.tools()]

    def _connect(self) -> None:
        if self._client is not None:
            return
        if self._thread is None or not self._thread.alive:
            self._thread = LoopThread(f"mcp:{self.server!r}"[:60])
        try:
            self._thread.run(self._open(), self.connect_timeout_s)
        except Exception as exc:  # noqa: BLE001 - one clear error for every way it fails
            if self._tools is None:  # a first connection: nothing to keep
                self.close()
            else:
                self._shutdown()
            raise ConnectionError(f"cannot connect to the MCP server {self.server!r}: "
                                  f"{describe_exception(exc)}{self._stderr_tail()}") from exc
        self._down = None

    async def _open(self) -> None:
        """Start the task that owns the client (an anyio context must be left by the task that
        entered it) and wait until it is connected."""
        ready: asyncio.Future = asyncio.get_running_loop().create_future()
        self._closer = asyncio.Event()
        self._owner = asyncio.ensure_future(self._own(ready))
        await ready

    async def _own(self, ready: asyncio.Future) -> None:
        from mcp import Client
        try:
            async with Client(self._transport(), mode="legacy") as client:
                self._client = client
                if not ready.done():
                    ready.set_result(None)
                await self._closer.wait()
        except BaseException as exc:  # noqa: BLE001 - the server went away: the tools are down
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else
                                    ConnectionError(repr(exc)))
            self._down = self._down or f"the MCP server connection ended ({describe_exception(exc)})"
        finally:
            self._client = None
            if self._down is None and not self._closer.is_set():
                self._down = "the MCP server connection ended"

    def _transport(self) -> Any:
        from mcp import StdioServerParameters
        if isinstance(self.target, StdioServerParameters):
            from mcp.client.stdio import stdio_client
            self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
            return stdio_client(self.target, errlog=self._stderr)
        from mcp.client.streamable_http import streamable_http_client
        return streamable_http_client(self.target)

    async def _list(self) -> list[Any]:
        tools, cursor = [], None
        while True:
            page = await self._client.list_tools(cursor=cursor) if cursor else \
                await self._client.list_tools()
            tools.extend(page.tools)
            cursor = getattr(page, "next_cursor", None)
            if not cursor:
                return tools

    def reconnect(self) -> None:
        """Open a new connection after the server went down (the tool list is kept; the
        count of failed restarts starts over)."""
        self._closed = False
        self._shutdown()
        self._connect()
        self._failed_restarts, self._retry_at = 0, 0.0

    def close(self) -> None:
        """Close the connection (a stdio server is stopped) and the loop thread.  Idempotent;
        calls after it are ``INFRA_ERROR`` (no restart) until ``reconnect()``."""
        self._closed = True
        self._shutdown()
        if self._thread is not None:
            self._thread.stop()
            self._thread = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def _shutdown(self) -> None:
        thread, owner = self._thread, self._owner
        if thread is None or owner is None or not thread.alive:
            return
        self._owner = None

        async def stop() -> None:
            self._closer.set()
            try:
                await asyncio.wait_for(asyncio.shield(owner), 10)
            except BaseException:  # noqa: BLE001 - a server that will not stop is killed below
                owner.cancel()
        try:
            thread.run(stop(), 15)
        except Exception:  # noqa: BLE001 - closing must always finish
            pass

    # ------------------------------------------------------------------ calls
    async def call(self, name: str, arguments: dict[str, Any],
                   parameters: dict[str, Any] | None = None) -> ToolResult:
        """Call tool ``name``; the status is what the host saw (see the module docstring)."""
        if parameters is not None:
            problem = check_arguments(arguments, parameters,
                                      allow_unknown=parameters.get("additionalProperties")
                                      is not False)
            if problem:
                return ToolResult.error(f"{name}: {problem}", bad_arguments=True)
        if self._down is not None or self._client is None or self._thread is None:
            down = await self._restart()
            if down is not None:
                return ToolResult.infra(down, server=str(self.server))
        start = time.perf_counter()
        try:
            result = await self._thread.submit(self._client.call_tool(name, arguments),
                                               self.timeout_s)
        except asyncio.TimeoutError:
            return ToolResult(f"Error: the {name} tool timed out after {self.timeout_s:g} s",
                              Status.TIMEOUT, time.perf_counter() - start)
        except Exception as exc:  # noqa: BLE001 - the connection broke during this call
            self._down = self._down or f"the MCP server failed ({describe_exception(exc)})"
            if isinstance(self.target, str):  # a URL: an unreachable server is the host's
                return ToolResult.infra(f"the MCP server failed during {name} "
                                        f"({describe_exception(exc)})", server=str(self.server))
            return ToolResult.error(f"{name}: the MCP server stopped answering during this "
                                    f"call ({describe_exception(exc)}); it is restarted for "
                                    "the next call", server_died=True)
        text = _content_text(result.content)
        if result.is_error:
            text = _PYDANTIC_URL.sub("", text)
        status = Status.ERROR if result.is_error else Status.OK
        return ToolResult(cap(text, self.max_result_chars), status, time.perf_counter() - start)

    async def _restart(self) -> str | None:
        """Reconnect a server that went down (``None``), or why it stays down: ``max_restarts``
        failed tries in a row, or the backoff after the last failed one not over yet."""
        if self._closed or self._tools is None:
            return "the MCP server is not connected" + (" (closed)" if self._closed else "")
        if self._failed_restarts >= self.max_restarts:
            return (f"{self._down or 'the MCP server is down'}; {self.max_restarts} restarts "
                    "failed in a row")
        if time.monotonic() < self._retry_at:
            return f"{self._down or 'the MCP server is down'}; restarting it failed"
        return await asyncio.get_running_loop().run_in_executor(None, self._restart_now)

    def _restart_now(self) -> str | None:
        with self._restart_lock:  # one restart at a time; callers behind it find it done
            if self._down is None and self._client is not None:
                return None
            try:
                self._shutdown()
                self._connect()
            except Exception as exc:  # noqa: BLE001 - it stays down, for a while
                self._failed_restarts += 1
                self._retry_at = time.monotonic() + min(30.0, 0.5 * 2 ** self._failed_restarts)
                self._down = f"the MCP server cannot be restarted ({describe_exception(exc)})"
                return self._down
            self._failed_restarts, self.restarts = 0, self.restarts + 1
            return None

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.flush()
            self._stderr.seek(0)
            text = self._stderr.read()[-STDERR_TAIL:].strip()
        except (OSError, ValueError):
            return ""
        return f"; its stderr ends: {text}" if text else ""


class McpTool(Tool):
    """One tool of an MCP server, called through its ``McpTools`` connection."""

    def __init__(self, source: McpTools, listed: Any):
        self.source = source
        self.name = listed.name
        self.description = escape_third_party(listed.description or listed.name)
        self.parameters = escape_schema(dict(listed.input_schema or
                                             {"type": "object", "properties": {}}))
        self._raw_parameters = dict(listed.input_schema or {})
        self.schema = {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}}

    def __repr__(self) -> str:
        return f"McpTool({self.name!r} of {self.source.server!r})"

    async def call(self, arguments: dict[str, Any], session: Any = None) -> ToolResult:
        return await self.source.call(self.name, arguments, self._raw_parameters)


def _target(server: Any, env: dict[str, str] | None, cwd: str | None) -> Any:
    """The SDK's description of ``server``: a URL string or ``StdioServerParameters``."""
    try:
        from mcp import StdioServerParameters
    except ImportError as exc:
        raise ImportError("McpTools needs the MCP SDK: pip install 'tir-envs[mcp]'") from exc
    if isinstance(server, StdioServerParameters):
        return server
    if isinstance(server, str) and server.startswith(("http://", "https://")):
        return server
    if isinstance(server, str):
        server = shlex.split(server)
    if isinstance(server, (list, tuple)) and server and all(isinstance(a, str) for a in server):
        return StdioServerParameters(command=server[0], args=list(server[1:]),
                                     env={**os.environ, **(env or {})}, cwd=cwd)
    raise TypeError(f"server must be an http(s) URL, a command (a string or a list of strings) "
                    f"or mcp.StdioServerParameters; got {server!r}")


def _plain_name(name: Any, server: Any) -> bool:
    """Whether a listed tool's name is a plain identifier (else it is skipped, with a
    warning: a name is shown in the prompt and written by the policy)."""
    if isinstance(name, str) and TOOL_NAME.fullmatch(name):
        return True
    warnings.warn(f"the MCP server {server!r} offers a tool named {escape_third_party(name)!r}, "
                  "which is no plain identifier; it is skipped", stacklevel=3)
    return False


def _content_text(content: Sequence[Any]) -> str:
    """The text a model reads from an MCP result's content blocks."""
    parts = []
    for block in content:
        text = getattr(block, "text", None)
        if text is not None:
            parts.append(text)
        else:
            parts.append(f"[{getattr(block, 'type', 'content')} content]")
    return "\n".join(parts)


@atexit.register
def _close_all() -> None:
    for tools in list(_LIVE):
        tools.close()
