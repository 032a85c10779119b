"""``FamilyFormat``: a protocol's tool calls written in the model family's own syntax.

When the renderer renders ``tools=`` (Qwen3's ``<tool_call>`` JSON, Llama 3's JSON turn,
Mistral's ``[TOOL_CALLS]``, DeepSeek's call tokens, GLM's ``<arg_key>`` XML), a protocol with
native tools (RITE) parses calls with the renderer instead of its own format.  The text is the
decoded action: a call marker the policy typed as ordinary tokens decodes to the same text as the
special id and is parsed the same way (the tokenizer's ``encode`` maps marker text back to its
id).  Generation stops on the family's stop ids, not on strings.
"""

from __future__ import annotations

from typing import Sequence

from tir_envs.chat.renderer import ChatRenderer
from tir_envs.formats.base import ToolCall, ToolCallFormat
from tir_envs.formats.json_calls import ARGUMENT_NAMES


class FamilyFormat(ToolCallFormat):
    name = "family"

    def __init__(self, renderer: ChatRenderer, argument_names: dict[str, str] | None = None):
        self.renderer = renderer
        #: which argument a tool's main input fills (``render_call``): the protocol's own
        #: format's, so a function tool's ``country`` is filled, not a generic ``input``
        self.argument_names = {**ARGUMENT_NAMES, **(argument_names or {})}

    @property
    def stop_sequences(self) -> list[str]:
        return []

    def parse(self, text: str) -> list[ToolCall]:
        try:
            return list(self.renderer.parse_calls(text))
        except Exception as exc:  # noqa: BLE001 - a format never raises on model output
            return [ToolCall(None, {}, text, 0, len(text), f"unparseable tool call: {exc}")]

    def render_result(self, call: ToolCall, text: str) -> str:
        return text

    def render_observation(self, calls: Sequence[ToolCall], texts: Sequence[str],
                           action_text: str) -> str:
        return "\n".join(texts)

    def render_call(self, tool: str, body: str) -> str:
        return self.renderer.render_calls([(tool, {self.argument_names.get(tool, "input"):
                                                   body})])

    def render_call_arguments(self, tool: str, arguments: dict) -> str:
        """A call with any ``arguments``, in the family's syntax."""
        return self.renderer.render_calls([(tool, arguments)])

    def prose(self, text: str) -> str:
        out = text
        for call in self.parse(text):
            if call.raw:
                out = out.replace(call.raw, " ")
        return out


