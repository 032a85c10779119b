"""``tir/ToolUse-v0``: your tasks, any tools, a reward, and nothing to subclass.

::

    def lookup(city: str) -> str:
        '''The capital of a country.  Args: city: ...'''

    env = tir_envs.make("tir/ToolUse-v0", tasks=[{"question": ..., "answer": ...}],
                        tools=[lookup, McpTools("http://127.0.0.1:8000/mcp"), "python"],
                        reward="em")

``tools``: plain functions (``function_tool``), ``Tool`` objects, ``McpTools`` (all the
server's tools, listed now), the project's own ``"python"``, ``"search"`` and ``"sql"`` tools,
or ``"module:attr"`` strings naming any of those (how the command line passes a function:
``--env-arg tools='["my_tools:lookup"]'``).  ``reward``: ``"em"`` (default), ``"f1"``,
``"math"``, a ``Reward`` or a function ``f(task, trajectory, answer)``
(``tir_envs.rewards.answer``).  Calls are JSON
(``<tool_call>{...}</tool_call>``) and the answer is ``<answer>…</answer>``
(``tir_envs.protocols.tool_use``); the schemas the prompt lists come from each tool.

The env closes the tools it built (``"python"``, ``"search"``, ``"sql"``); tools and
``McpTools`` you pass are yours, shared by every env you pass them to (one MCP server for a
whole pool), and closed by you (``McpTools.close()``, or at exit).
"""

from __future__ import annotations

from typing import Any, Sequence

from tir_envs.env import TIREnv, reject_wiring
from tir_envs.envs.tooling import SHIPPED_TOOLS, pop_tool_config, tool_keywords
from tir_envs.protocols.tool_use import DEFAULT_INSTRUCTIONS, ToolUseProtocol
from tir_envs.rewards.answer import answer_reward
from tir_envs.tools.base import Tool
from tir_envs.tools.function import FunctionTool

def tool_schema(tool: Tool) -> dict[str, Any]:
    """The function schema of any tool: its own ``schema``, a shipped tool's (its record in
    ``SHIPPED_TOOLS``), or a generic one (one string argument) for a ``Tool`` subclass that
    declares none."""
    own = getattr(tool, "schema", None)
    if isinstance(own, dict):
        return own
    spec = SHIPPED_TOOLS.get(tool.name)
    description = spec.description if spec else (tool.__doc__ or tool.name).strip()
    arg, arg_doc = spec.argument if spec else ("input", "The tool's input.")
    return {"type": "function", "function": {
        "name": tool.name, "description": description.split("\n\n")[0],
        "parameters": {"type": "object", "required": [arg],
                       "properties": {arg: {"type": "string", "description": arg_doc}}}}}


class ToolUseEnv(TIREnv):
    """Generic tool use (see the module docstring).

    ``instructions``: the system prompt's first paragraph (the tools' schemas follow it).
    ``chat``: ``False`` for base models (raw prompt, ``<tool_response>`` blocks).  The shipped
    tools take their keywords (``retriever``, ``topk``, ``backend``, ``stateful``,
    ``tool_timeout_s``; ``tir_envs.envs.tooling``).  Budgets default to 8 turns and 8192 tokens.
    """

    env_id = "tir/ToolUse-v0"
    configured_tools = ("search", "python")
    scoring = "qa"

    def __init__(self, tasks: Any = None, tools: Sequence[Any] | Any = (),
                 reward: Any = "em", tokenizer: Any = None,
                 instructions: str = DEFAULT_INSTRUCTIONS, chat: bool | None = None,
                 **kwargs: Any):
        reject_wiring(kwargs, "ToolUseEnv", "Pass tools=[...] (functions, Tools, McpTools, "
                      "'python', 'search', 'sql') and instructions=...")
        self._owned: list[Tool] = []
        built = self._build_tools(tools, kwargs)
        if not built:
            raise ValueError("tir/ToolUse-v0 needs at least one tool in tools=")
        names = [t.name for t in built]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"two tools are named {duplicates}; give one of them another name "
                             "(function_tool(fn, name=...))")
        protocol = ToolUseProtocol([tool_schema(t) for t in built], instructions, chat=chat)
        super().__init__(tokenizer=tokenizer, tasks=tasks, protocol=protocol, tools=built,
                         reward=answer_reward(reward), **kwargs)

    # ------------------------------------------------------------------ tools
    def _build_tools(self, tools: Any, kwargs: dict[str, Any]) -> list[Tool]:
        items = [tools] if isinstance(tools, str) or not isinstance(tools, Sequence) else tools
        items = [resolve_tool_spec(t) if isinstance(t, str) and t not in SHIPPED_TOOLS else t
                 for t in items]
        flat = [x for item in items for x in (item if isinstance(item, list) else [item])]
        wanted = list(dict.fromkeys(t for t in flat if isinstance(t, str) and t in SHIPPED_TOOLS))
        configs = pop_tool_config(kwargs, *wanted) if wanted else {}
        leftover = sorted(tool_keywords(list(SHIPPED_TOOLS)) & set(kwargs))
        if leftover:  # keywords of shipped tools that tools= does not include
            raise TypeError(f"{leftover} configure shipped tools that tools= does not include "
                            f"(it has {wanted or 'none'}); add the tool or drop the keyword")
        out: list[Tool] = []
        for item in flat:
            out.extend(self._one_tool(item, configs))
        return out

    def _one_tool(self, item: Any, configs: dict[str, Any]) -> list[Tool]:
        from tir_envs.tools.mcp_tools import McpTools
        if isinstance(item, Tool):
            return [item]
        if isinstance(item, McpTools):
            return list(item.tools())
        if isinstance(item, str) and item in configs:  # a shipped tool (SHIPPED_TOOLS)
            tool = configs[item].build()
            self._owned.append(tool)
            return [tool]
        if callable(item):
            return [FunctionTool(item)]
        raise TypeError(f"tools= takes functions, Tool objects, McpTools, 'python', 'search', "
                        f"'sql' or 'module:attr' strings; got {item!r}")

    def on_close(self) -> None:
        for tool in self._owned:
            tool.close()


def resolve_tool_spec(spec: str) -> Any:
    """``"package.module:attr"`` -> the object (a function, a Tool, McpTools, or a list)."""
    from tir_envs.user_modules import UserModuleError, resolve

    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"tool {spec!r}: expected 'python', 'search', 'sql' or "
                         "'package.module:function'")
    try:
        return resolve(spec, "tools=")
    except UserModuleError as exc:
        raise ValueError(f"tool {spec!r}: cannot import {module!r}: {exc}") from exc
