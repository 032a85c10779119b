"""Tools an environment can call: Python sandbox, search, SQL, plain functions, MCP servers."""

from tir_envs.tools.base import Tool, ToolResult, ToolStatus
from tir_envs.tools.function import FunctionTool, function_tool, tool

__all__ = ["Tool", "ToolResult", "ToolStatus", "FunctionTool", "function_tool", "tool"]
