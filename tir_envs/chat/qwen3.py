"""Qwen3 (thinking on and off), written for this project; needs no optional package.

The text of a turn is built whole and encoded once with the fast tokenizer (special and added
tokens are whole ids either way), which keeps a chat step cheap.  Checked token for token
against PyPI ``renderers``' Qwen3 renderer in ``tests/test_chat_families.py``.

Framing: tools go in the system turn (``# Tools`` … ``<tools>`` one JSON schema a line …);
calls are Hermes JSON in ``<tool_call>``; tool results are grouped into one ``user`` turn of
``<tool_response>`` blocks; the generation prompt is ``<|im_start|>assistant\\n``, with the
empty ``<think>\\n\\n</think>\\n\\n`` prefilled when thinking is off.  A completion without
``<|im_end|>`` gets it as env tokens, preceded by ``</think>`` when it stopped while reasoning.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from tir_envs.chat.renderer import ChatRenderer, Message, Reasoning, RendererRefused
from tir_envs.chat.seams import encode_pieces
from tir_envs.formats.base import ToolCall
from tir_envs.formats.json_calls import JsonFormat

TOOLS_HEADER = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
TOOLS_FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>')
EMPTY_THINK = "<think>\n\n</think>\n\n"


class Qwen3Renderer(ChatRenderer):
    family = "qwen3"
    reasoning = Reasoning("<think>", "</think>", "content", "qwen3")
    renders_tools = True

    def __init__(self, tokenizer: Any, codec: Any, thinking: str | None = None):
        super().__init__(tokenizer)
        self.codec = codec
        self.thinking = thinking or template_thinking(tokenizer)
        ids = {t: tokenizer.convert_tokens_to_ids(t) for t in
               ("<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>")}
        if any(not isinstance(i, int) or i < 0 or i == tokenizer.unk_token_id
               for i in ids.values()):
            raise ValueError("the qwen3 renderer needs Qwen3's vocabulary (<|im_end|>, <think>, "
                             "</think>, <tool_call>); pass the model's own tokenizer")
        self.im_end, self.eot = ids["<|im_end|>"], ids["<|endoftext|>"]
        self.think, self.think_end, self.call = ids["<think>"], ids["</think>"], \
            ids["<tool_call>"]
        self._json = JsonFormat()
        self._heads: dict[str, list[int]] = {}

    def opener(self) -> str:
        return "<|im_start|>assistant\n" + (EMPTY_THINK if self.thinking == "off" else "")

    def prompt_ids(self, messages: list[Message], tools: list[dict] | None = None) -> list[int]:
        rest = list(messages)
        system = rest.pop(0)["content"] if rest and rest[0]["role"] == "system" else None
        head = ""
        if tools:
            lead = f"{system}\n\n" if system else ""
            schemas = "".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools)
            head = f"<|im_start|>system\n{lead}{TOOLS_HEADER}{schemas}{TOOLS_FOOTER}<|im_end|>\n"
        elif system is not None:
            head = f"<|im_start|>system\n{system}<|im_end|>\n"
        # the system turn ends at special ids, so encoding it apart is exact; every episode of
        # an env shares it, so it is encoded once
        if head not in self._heads:
            self._heads = {head: self.codec.encode(head)}
        return self._heads[head] + self.codec.encode(self._messages(rest) + self.opener())

    def _messages(self, messages: list[Message]) -> str:
        """The text of prompt messages (the task's: trusted)."""
        return "".join(text for text, _ in self._segments(messages))

    def _segments(self, messages: list[Message]) -> list[tuple[str, bool]]:
        """``(text, untrusted)`` pieces; a tool result is untrusted (added tokens split)."""
        out: list[tuple[str, bool]] = []
        for i, m in enumerate(messages):
            role, content = m["role"], m.get("content") or ""
            if role == "tool":
                first = i == 0 or messages[i - 1]["role"] != "tool"
                last = i + 1 == len(messages) or messages[i + 1]["role"] != "tool"
                out += [(("<|im_start|>user" if first else "") + "\n<tool_response>", False),
                        (f"\n{content}\n", True),
                        ("</tool_response>" + ("<|im_end|>\n" if last else ""), False)]
            elif role in ("user", "system"):
                out.append((f"<|im_start|>{role}\n", False))
                out.append((f"{content}<|im_end|>\n", False))
            else:
                raise RendererRefused(f"qwen3: an env adds no {role!r} message")
        return out

    def bridge_ids(self, context_ids: Sequence[int], completion_ids: Sequence[int],
                   messages: list[Message]) -> list[int]:
        close: list[int] = []
        if not any(t in (self.im_end, self.eot) for t in completion_ids):
            if self._reasoning_open(completion_ids):
                close.append(self.think_end)
            close.append(self.im_end)
        pieces = [("\n", False), *self._segments(messages), (self.opener(), False)]
        return close + encode_pieces(self.tokenizer, pieces)

    def _reasoning_open(self, ids: Sequence[int]) -> bool:
        """The rule's ``ends_inside`` on ids: a cut turn whose last ``<think>`` is unclosed
        (a call inside it is reasoning too: the env's close makes it so)."""
        state = False
        for t in ids:
            if t == self.think:
                state = True
            elif t == self.think_end:
                state = False
        return state

    def stop_token_ids(self) -> tuple[int, ...]:
        return (self.im_end, self.eot)

    def parse_calls(self, text: str) -> list[ToolCall]:
        return self._json.parse(text)

    def render_calls(self, calls: list[tuple[str, dict]]) -> str:
        think = f"<think>\nI call {calls[0][0]}.\n</think>\n\n" if self.thinking == "on" else ""
        body = "\n".join("<tool_call>\n" + json.dumps({"name": n, "arguments": a},
                                                      ensure_ascii=False) + "\n</tool_call>"
                         for n, a in calls)
        return think + body + "<|im_end|>"


def template_thinking(tokenizer: Any) -> str:
    """The thinking mode the tokenizer's chat template defaults to: ``"off"`` where its
    generation prompt, rendered without ``enable_thinking``, prefills the empty block (a
    template that forces no-think, or defaults to it), else ``"on"`` (Qwen3's default)."""
    if not getattr(tokenizer, "chat_template", None):
        return "on"
    try:
        text = tokenizer.apply_chat_template([{"role": "user", "content": "q"}], tokenize=False,
                                             add_generation_prompt=True)
    except Exception:  # noqa: BLE001 - a template that cannot render says nothing here
        return "on"
    return "off" if str(text).endswith(EMPTY_THINK) else "on"
