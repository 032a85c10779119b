"""The generic tool-use protocol: any tools, JSON calls, a tagged answer (``tir/ToolUse-v0``).

* Chat prompt, for a model family whose renderer renders tools (Qwen3, Llama 3, Mistral,
  DeepSeek V3, GLM-4.5; ``docs/chat_models.md``): the instructions as the system message, and
  every tool's JSON schema passed to the family's own ``tools=`` rendering (``tool_schemas``);
  calls are then written and parsed in the family's syntax, and each result is a ``tool``
  message in the family's framing (``tir_envs.chat.ChatBinding``).
* Chat prompt otherwise (the tokenizer's own template) and raw text (base models): a system
  paragraph that lists the tools as JSON function schemas inside ``<tools>…</tools>`` (the
  Hermes/Qwen convention most chat models were tuned on), then the question.  A call is
  ``<tool_call>{"name": …, "arguments": {…}}</tool_call>``; generation pauses at
  ``</tool_call>``.  Results come back as a ``tool`` chat message (the template's glue is env
  tokens, loss mask 0; several results of one turn are separated the way the template
  separates consecutive tool messages), or as ``<tool_response>`` blocks in raw text.
* The first action without a call ends the episode; its last ``<answer>…</answer>`` (outside
  any call) is the answer.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from tir_envs.formats.json_calls import JsonFormat
from tir_envs.protocols.base import Budgets, EpisodeState, Protocol

DEFAULT_INSTRUCTIONS = ("Answer the question. Call the tools when they help; when you are "
                        "sure, give the final answer as <answer>...</answer> in a message "
                        "without tool calls.")


def tools_block(schemas: Sequence[dict[str, Any]]) -> str:
    """The system prompt's description of the tools and of how a call is written."""
    lines = "\n".join(json.dumps(s, ensure_ascii=False) for s in schemas)
    return ("# Tools\n\nThe available functions, as JSON signatures:\n<tools>\n" + lines +
            "\n</tools>\n\nTo call a function, write its name and arguments as one JSON object "
            "between tags:\n<tool_call>\n{\"name\": \"<function name>\", \"arguments\": "
            "{<argument object>}}\n</tool_call>")


def main_argument(schema: dict[str, Any]) -> str:
    """The argument a scripted policy fills with a call's body: the first required string
    parameter, else the first parameter."""
    params = schema.get("function", schema).get("parameters", {})
    props = params.get("properties", {})
    for name in params.get("required", []):
        if props.get(name, {}).get("type", "string") == "string":
            return name
    return next(iter(props), "input")


class ToolUseProtocol(Protocol):
    """See the module docstring.  ``schemas``: the tools' function schemas; ``instructions``:
    the system prompt's first paragraph; ``answer_tag``: the tag the answer is read from."""

    name = "tool_use"
    chat = True
    observation_role = "tool"
    budgets = Budgets(max_turns=8, max_tool_calls=None, max_obs_tokens=1024,
                      max_total_tokens=8192)

    def __init__(self, schemas: Sequence[dict[str, Any]],
                 instructions: str = DEFAULT_INSTRUCTIONS, answer_tag: str = "answer",
                 chat: bool | None = None):
        self.schemas = list(schemas)
        self.instructions = instructions
        names = {s["function"]["name"]: main_argument(s) for s in self.schemas}
        super().__init__(JsonFormat(argument_names=names),
                         instructions + "\n\n" + tools_block(self.schemas), chat)
        self.answer_tag = answer_tag
        if not self.chat:  # a base model: raw text, results in <tool_response> blocks
            self.observation_role = None

    def prompt(self, task, use_tools: bool = True):
        """With the family rendering the tools (``native_tools``) the system message is the
        instructions alone: the schemas are the renderer's, never listed twice."""
        if self.chat and self.native_tools:
            return [{"role": "system", "content": self.instructions},
                    {"role": "user", "content": task.question}]
        return super().prompt(task, use_tools)

    def tool_schemas(self) -> list[dict[str, Any]]:
        """Every tool's function schema (the functions', the MCP server's as listed at
        ``make``, the shipped tools'), for a family that renders ``tools=``."""
        return list(self.schemas)

    def observation(self, calls, texts, text, state: EpisodeState) -> str:
        if not self.chat:  # a base model reads the format's own <tool_response> blocks
            return self.format.render_observation(calls, texts, text)
        return "\n</tool_response>\n<tool_response>\n".join(t.strip("\n") for t in texts)

    def render_answer(self, text: str) -> str:
        return f"<{self.answer_tag}>{text}</{self.answer_tag}>"

    def answer(self, state: EpisodeState) -> str | None:
        if not state.actions:
            return None
        prose = self.format.prose(state.actions[-1])
        opener, closer = f"<{self.answer_tag}>", f"</{self.answer_tag}>"
        end = prose.rfind(closer)
        start = prose.rfind(opener, 0, end) if end >= 0 else -1
        if start < 0:
            return None
        value = prose[start + len(opener):end].strip()
        return value or None
