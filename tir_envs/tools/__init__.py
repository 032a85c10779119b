"""Tools an environment can call: Python sandbox, search, SQL, plain functions, MCP servers.

``function_tool``/``tool``/``FunctionTool`` (``tir_envs.tools.function``) are imported on first
use, so importing this package (as the command line does) loads no asyncio.
"""

from tir_envs.tools.base import Status, Tool, ToolResult, ToolStatus

__all__ = ["Status", "Tool", "ToolResult", "ToolStatus", "FunctionTool", "function_tool", "tool"]
_LAZY = ("FunctionTool", "function_tool", "tool")


def __getattr__(name: str):
    if name in _LAZY:
        from tir_envs.tools import function
        return getattr(function, name)
    raise AttributeError(f"module 'tir_envs.tools' has no attribute {name!r}")
