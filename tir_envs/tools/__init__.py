"""Tools an environment can call: Python sandbox, search, SQL."""

from tir_envs.tools.base import Tool, ToolResult, ToolStatus

__all__ = ["Tool", "ToolResult", "ToolStatus"]
