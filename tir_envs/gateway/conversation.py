"""The wire-neutral conversation every API is translated to, and completions parsed back.

Each wire API (chat completions, responses, Anthropic messages) turns its request into one
list of chat-template messages: ``role`` (system/user/assistant/tool), ``content`` (text),
``reasoning_content`` (an assistant turn's reasoning, as the family's template reads it),
``tool_calls`` (``{"id", "type": "function", "function": {"name", "arguments": dict}}``: the
arguments as an object, which every template serialises itself) and ``tool_call_id``.  The
gateway renders that list with the family's serving template; what the policy sampled comes
back as a ``Parsed`` completion: reasoning, visible content and calls, read with the family's
own parser.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any, Callable

from tir_envs.chat.reasoning import ends_inside

Message = dict[str, Any]


class BadRequest(ValueError):
    """A request the gateway refuses (HTTP 400): the message names what was wrong."""

    def __init__(self, message: str, status: int = 400, code: str = "invalid_request_error"):
        super().__init__(message)
        self.status = status
        self.code = code


def call_id() -> str:
    return "call_" + secrets.token_hex(12)


def arguments_object(arguments: Any, where: str) -> dict[str, Any]:
    """A call's arguments as an object (clients send a JSON string or an object)."""
    if isinstance(arguments, dict):
        return arguments
    if arguments in (None, ""):
        return {}
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise BadRequest(f"{where}: arguments are not JSON ({exc.msg}); send the JSON "
                             "object the model wrote") from None
        if isinstance(value, dict):
            return value
    raise BadRequest(f"{where}: arguments must be a JSON object, got {type(arguments).__name__}")


def text_of(content: Any, where: str) -> str:
    """Plain text of a message content: a string, or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])
            elif isinstance(part, dict) and part.get("type") in ("image_url", "image",
                                                                  "input_image", "file"):
                raise BadRequest(f"{where}: {part['type']} parts are not supported (the "
                                 "gateway serves text models)")
        return "".join(out)
    raise BadRequest(f"{where}: content must be a string or a list of parts")


def function_tool(name: Any, description: Any, parameters: Any, where: str) -> dict[str, Any]:
    if not isinstance(name, str) or not name:
        raise BadRequest(f"{where}: a tool needs a name")
    fn: dict[str, Any] = {"name": name, "description": description or "",
                          "parameters": parameters or {"type": "object", "properties": {}}}
    return {"type": "function", "function": fn}


@dataclass
class Parsed:
    """A completion read back: its reasoning, visible content and calls."""

    text: str
    reasoning: str | None = None
    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    #: a call the family's parser could not read (kept as content: an observation)
    parse_error: str | None = None

    def message(self) -> Message:
        """The assistant message a client echoes back, in the neutral form."""
        msg: Message = {"role": "assistant", "content": self.content}
        if self.reasoning is not None:
            msg["reasoning_content"] = self.reasoning
        if self.tool_calls:
            msg["tool_calls"] = [{"id": c["id"], "type": "function",
                                  "function": {"name": c["name"],
                                               "arguments": json.loads(c["arguments"])}}
                                 for c in self.tool_calls]
        return msg


#: where a family's tool-call syntax starts (the visible content ends there)
CALL_MARKERS = ("<tool_call>", "[TOOL_CALLS]", "<|python_tag|>",
                "<\uff5ctool\u2581calls\u2581begin\uff5c>")


def parse_completion(renderer: Any, text: str, prompt_text: str,
                     new_id: Callable[[], str] = call_id) -> Parsed:
    """``text`` (the sampled completion, end-of-turn removed) split with the family's rules;
    a call the policy gave no id gets ``new_id()``.  gpt-oss has its own reading
    (``library_families.parse_family``)."""
    reasoning, rest = split_reasoning(renderer, text, prompt_text)
    out = Parsed(text=text, reasoning=reasoning, content=rest.strip())
    if not getattr(renderer, "renders_tools", False):
        return out
    try:
        calls = renderer.parse_calls(rest)
    except Exception as exc:  # noqa: BLE001 - the model's text, never an exception
        out.parse_error = f"{type(exc).__name__}: {exc}"
        return out
    good = [c for c in calls if c.name and not getattr(c, "error", None)]
    if not good:
        return out
    out.tool_calls = [{"id": getattr(c, "call_id", None) or new_id(), "name": c.name,
                       "arguments": json.dumps(c.arguments or {}, ensure_ascii=False)}
                      for c in good]
    marks = [i for i in (rest.find(m) for m in CALL_MARKERS) if i >= 0]
    cut = min(marks + [min(c.start for c in good)])
    out.content = rest[:cut].strip()
    return out


def split_reasoning(renderer: Any, text: str, prompt_text: str) -> tuple[str | None, str]:
    """``(reasoning, rest)``; a prompt that opened a block (a prefilled ``<think>``) makes the
    completion start inside it."""
    block = getattr(renderer, "reasoning", None)
    if block is None:
        return None, text
    inside = ends_inside(prompt_text[-200:], block)
    if inside:
        end = text.find(block.close)
        if end < 0:
            return text.strip(), ""
        return text[:end].strip(), text[end + len(block.close):]
    start = text.find(block.open)
    if start < 0 or text[:start].strip():
        return None, text
    end = text.find(block.close, start)
    if end < 0:
        return text[start + len(block.open):].strip(), ""
    return text[start + len(block.open):end].strip(), text[end + len(block.close):]
