"""Hermes/Qwen JSON calls: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

Results come back as ``<tool_response>`` blocks.  Broken JSON, a missing name or non-object
arguments become calls with ``error`` set, which the env turns into an error observation.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tir_envs.formats.base import ToolCall, ToolCallFormat
from tir_envs.formats.tagged import TaggedPattern

_CALL = TaggedPattern(r"<tool_call>(.*?)</tool_call>", ["tool_call"])
#: how deep a call's JSON may nest.  Python's parser raises ``RecursionError`` near 1,000
#: levels, and every later copy or dump of a value nearly that deep may too: deeper is the
#: call's error, like broken JSON.
MAX_JSON_DEPTH = 64


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d)
            if d <= MAX_JSON_DEPTH:
                stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def decode_json(text: str) -> tuple[Any, int, str | None]:
    """``(value, characters read, error)`` of the JSON value at the start of ``text``; never
    raises for what a policy writes (broken JSON, nesting past ``MAX_JSON_DEPTH`` or Python's
    recursion limit, an integer past its 4,300-digit limit)."""
    try:
        obj, used = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError as exc:
        return None, 0, f"{exc.msg} at position {exc.pos}"
    except RecursionError:
        return None, 0, f"nested deeper than {MAX_JSON_DEPTH} levels"
    except ValueError as exc:  # int('9' * 5000): "Exceeds the limit (4300 digits) ..."
        return None, 0, str(exc)
    if _depth(obj) > MAX_JSON_DEPTH:
        return None, 0, f"nested deeper than {MAX_JSON_DEPTH} levels"
    return obj, used, None


def _decode_call(body: str) -> tuple[str | None, dict[str, Any], str | None]:
    """Parse one JSON call body into (name, arguments, error)."""
    obj, _, error = decode_json(body.strip())
    if error is not None:
        return None, {}, f"invalid JSON in tool call: {error}"
    if not isinstance(obj, dict):
        return None, {}, "a tool call must be a JSON object with 'name' and 'arguments'"
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return None, {}, "the tool call has no 'name' string"
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # OpenAI style: arguments serialised as a JSON string
        text = args.strip()
        args, used, error = decode_json(text)
        if error is not None or used != len(text):
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
