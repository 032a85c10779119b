"""Hermes/Qwen JSON calls: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

Results come back as ``<tool_response>`` blocks.  Broken JSON, a missing name or non-object
arguments become calls with ``error`` set, which the env turns into an error observation.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tir_envs.formats.base import ToolCall, ToolCallFormat

_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def _decode_call(body: str) -> tuple[str | None, dict[str, Any], str | None]:
    """Parse one JSON call body into (name, arguments, error)."""
    text = body.strip()
    try:
        obj, _ = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError as exc:
        return None, {}, f"invalid JSON in tool call: {exc.msg} at position {exc.pos}"
    if not isinstance(obj, dict):
        return None, {}, "a tool call must be a JSON object with 'name' and 'arguments'"
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return None, {}, "the tool call has no 'name' string"
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # OpenAI style: arguments serialised as a JSON string
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return name, {}, "'arguments' is a string that is not valid JSON"
    if not isinstance(args, dict):
        return name, {}, "'arguments' must be a JSON object"
    return name, args, None


#: the argument a tool's main input fills, for ``render_call``
ARGUMENT_NAMES = {"python": "code", "search": "query", "sql": "query", "answer": "answer"}


class JsonFormat(ToolCallFormat):
    """``argument_names``: which argument a tool's main input fills (``render_call``)."""

    name = "json"
    result_opener = "<tool_response>"

    def __init__(self, argument_names: dict[str, str] | None = None):
        self.argument_names = {**ARGUMENT_NAMES, **(argument_names or {})}

    @property
    def stop_sequences(self) -> list[str]:
        return ["</tool_call>"]

    def parse(self, text: str) -> list[ToolCall]:
        calls = []
        for m in _CALL.finditer(self.visible(text)):
            name, args, error = _decode_call(m.group(1))
            calls.append(ToolCall(name, args, m.group(0), m.start(), m.end(), error))
        return calls

    def prose(self, text: str) -> str:
        return _CALL.sub("", text)

    def render_call(self, tool: str, body: str) -> str:
        return self.render_call_arguments(tool, {self.argument_names.get(tool, "input"): body})

    def render_call_arguments(self, tool: str, arguments: dict[str, Any]) -> str:
        """A call with any ``arguments`` (``tir-envs audit``'s forged-field probes)."""
        return f"<tool_call>\n{json.dumps({'name': tool, 'arguments': arguments})}\n</tool_call>"

    def render_result(self, call: ToolCall, text: str) -> str:
        return f"<tool_response>\n{text.strip(chr(10))}\n</tool_response>"

    def render_observation(self, calls, texts, action_text: str) -> str:
        return "\n".join(self.render_result(c, t) for c, t in zip(calls, texts))
