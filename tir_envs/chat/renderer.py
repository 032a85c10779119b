"""``ChatRenderer``: how one model family turns a conversation into token ids, and back.

The env never re-renders sampled history.  A renderer gives it four things:
  * ``prompt_ids(messages, tools)``: the first prompt, with the family's own rendering of the
    tool schemas (each tool declares its JSON schema once);
  * ``bridge_ids(context, completion, messages)``: the env tokens after a sampled completion:
    the family's close when the policy did not sample it, the new (tool) messages in the
    family's canonical framing, and the next assistant opener.  The next prompt is always
    ``context + completion + bridge``: the completion byte for byte;
  * ``stop_token_ids``: the family's end-of-turn (and end-of-call) ids, for every backend;
  * ``parse_calls(text)``: tool calls in the family's own syntax (``renders_tools``).
``reasoning`` is the family's reasoning rule (``tir_envs.chat.reasoning``), if it has one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from tir_envs.chat.reasoning import Reasoning
from tir_envs.formats.base import ToolCall

Message = dict[str, Any]

__all__ = ["ChatRenderer", "FamilyCall", "Message", "Reasoning", "RendererRefused",
           "differing_span"]


@dataclass
class FamilyCall(ToolCall):
    """A call parsed in a family's syntax; ``call_id`` is the id the policy wrote (Mistral)."""

    call_id: str | None = field(default=None)


class ChatRenderer:
    """Base class of the per-family renderers (see the module docstring)."""

    #: the family's name in the registry (``tir_envs.chat.registry.FAMILIES``)
    family: str = "base"
    #: ``"on"``/``"off"`` for families with both modes, else ``None``
    thinking: str | None = None
    reasoning: Reasoning | None = None
    #: the family renders ``tools=`` and has its own tool-call syntax (``parse_calls``)
    renders_tools: bool = False

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer

    def prompt_ids(self, messages: list[Message], tools: list[dict] | None = None) -> list[int]:
        raise NotImplementedError

    def bridge_ids(self, context_ids: Sequence[int], completion_ids: Sequence[int],
                   messages: list[Message]) -> list[int]:
        raise NotImplementedError

    def stop_token_ids(self) -> tuple[int, ...]:
        raise NotImplementedError

    def parse_calls(self, text: str) -> list[ToolCall]:
        raise NotImplementedError(f"the {self.family} renderer has no tool-call syntax")

    def render_calls(self, calls: list[tuple[str, dict]]) -> str:
        """The text of an assistant turn making ``calls`` (name, arguments), as the family's
        template writes it (for scripted policies and ``tir-envs audit``)."""
        raise NotImplementedError(f"the {self.family} renderer has no tool-call syntax")

    def tool_messages(self, calls: Sequence[ToolCall], texts: Sequence[str]) -> list[Message]:
        """One ``tool`` message per executed call, carrying the call's id when it has one."""
        out = []
        for call, text in zip(calls, texts):
            msg: Message = {"role": "tool", "content": text, "name": call.name or ""}
            call_id = getattr(call, "call_id", None)
            if call_id:
                msg["tool_call_id"] = call_id
            out.append(msg)
        return out

    def describe(self) -> str:
        mode = f", thinking {self.thinking}" if self.thinking else ""
        return f"{self.family}{mode} ({type(self).__name__})"


class RendererRefused(ValueError):
    """A renderer cannot bridge this turn exactly (the env reports it; it never re-renders)."""


def differing_span(ids: Sequence[int], other: Sequence[int]) -> tuple[int, int]:
    """``(head, tail)``: how many ids ``ids`` shares with ``other`` at the start and, after
    that, at the end.  Two renders of one message that differ only in its content (the real
    one and a sentinel's) share the family's glue there; ``ids[head:len(ids) - tail]`` is
    the content as the family encoded it."""
    head = 0
    while head < min(len(ids), len(other)) and ids[head] == other[head]:
        head += 1
    tail = 0
    while tail < min(len(ids), len(other)) - head and ids[-1 - tail] == other[-1 - tail]:
        tail += 1
    return head, tail
