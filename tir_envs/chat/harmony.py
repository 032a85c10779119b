"""gpt-oss (harmony), through ``openai-harmony`` (Apache-2.0, extra ``chat``) for the prompt.

The prompt is openai-harmony's own render: the system message (model identity, knowledge
cutoff, the date as the template writes it, ``Reasoning: medium``, the valid channels), a
developer message with the protocol's system text as ``# Instructions`` and the tools as the
``functions`` namespace, then the user message and ``<|start|>assistant``.  The vocabulary is
o200k with the harmony specials (``tir_envs.bpe_ranks``: quicktok's ranks, offline).

A sampled turn is harmony messages: ``<|channel|>analysis<|message|>…<|end|>`` (reasoning:
never graded, never run), ``<|start|>assistant to=functions.NAME<|channel|>commentary
<|constrain|>json<|message|>{…}<|call|>`` (a call; the recipient may also follow the channel,
as gpt-oss often samples it), ``<|channel|>final<|message|>…<|return|>``
(the answer).  Generation stops at ``<|call|>`` and ``<|return|>``; a turn cut before either
gets ``<|end|>`` as env tokens.  A tool result is ``<|start|>functions.NAME to=assistant
<|channel|>commentary<|message|>…<|end|>``, then ``<|start|>assistant``: written here and
checked against openai-harmony's render in ``tests/test_chat_harmony.py``.  The tool output
is written as text, as openai-harmony renders it; the gpt-oss Jinja template JSON-quotes it
(``message.content|tojson``): the two references disagree there, and the env follows the
harmony library (what vLLM and the model's own tooling use).  Earlier analysis
is kept in the ledger (harmony's renderer drops it once a final answer follows; an episode
adds no turn after one).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from tir_envs.chat.dates import template_date
from tir_envs.chat.reasoning import HarmonyReasoning, harmony_messages
from tir_envs.chat.renderer import ChatRenderer, FamilyCall, Message, RendererRefused
from tir_envs.chat.seams import encode_pieces
from tir_envs.formats.json_calls import decode_json

CALL, RETURN, END = "<|call|>", "<|return|>", "<|end|>"


class HarmonyRenderer(ChatRenderer):
    family = "gpt-oss"
    reasoning = HarmonyReasoning()
    renders_tools = True

    def __init__(self, tokenizer: Any, thinking: str | None = None):
        super().__init__(tokenizer)
        if thinking is not None:
            raise ValueError("gpt-oss has no thinking switch (it always reasons, in the "
                             "analysis channel); leave thinking unset")
        ids = {t: tokenizer.convert_tokens_to_ids(t) for t in (CALL, RETURN, END, "<|start|>")}
        if any(not isinstance(i, int) or i < 0 or i == tokenizer.unk_token_id
               for i in ids.values()):
            raise ValueError("the gpt-oss renderer needs the harmony vocabulary (<|start|>, "
                             "<|call|>, <|return|>, <|end|>); pass the model's own tokenizer or "
                             "tokenizer='family:gpt-oss'")
        self.call_id, self.return_id, self.end_id = ids[CALL], ids[RETURN], ids[END]
        self.date = template_date(tokenizer, None)  # the template writes today's date
        self._tools: list[dict] | None = None
        self._encoding: Any = None

    # -- the prompt: openai-harmony's render -----------------------------------------------
    def encoding(self) -> Any:
        if self._encoding is None:
            from tir_envs.bpe_ranks import harmony_encoding
            self._encoding = harmony_encoding()
        return self._encoding

    def conversation(self, messages: list[Message], tools: list[dict] | None) -> Any:
        """The prompt messages as an openai-harmony ``Conversation``."""
        import openai_harmony as oh

        system = oh.SystemContent.new().with_conversation_start_date(self.date.isoformat())
        out = [oh.Message.from_role_and_content(oh.Role.SYSTEM, system)]
        rest = list(messages)
        instructions = rest.pop(0)["content"] if rest and rest[0]["role"] == "system" else None
        if instructions or tools:
            dev = oh.DeveloperContent.new()
            if instructions:
                dev = dev.with_instructions(instructions)
            if tools:
                dev = dev.with_function_tools([_tool(t) for t in tools])
            out.append(oh.Message.from_role_and_content(oh.Role.DEVELOPER, dev))
        for m in rest:
            if m["role"] != "user":
                raise RendererRefused(f"gpt-oss: a prompt holds system and user messages, got "
                                      f"{m['role']!r}")
            out.append(oh.Message.from_role_and_content(oh.Role.USER, m["content"]))
        return oh.Conversation.from_messages(out)

    def prompt_ids(self, messages: list[Message], tools: list[dict] | None = None) -> list[int]:
        import openai_harmony as oh

        self._tools = tools or None
        conv = self.conversation(messages, self._tools)
        return list(self.encoding().render_conversation_for_completion(conv, oh.Role.ASSISTANT))

    # -- a turn ----------------------------------------------------------------------------
    def bridge_ids(self, context_ids: Sequence[int], completion_ids: Sequence[int],
                   messages: list[Message]) -> list[int]:
        ended = bool(completion_ids) and completion_ids[-1] in (self.call_id, self.return_id)
        pieces: list[tuple[str, bool]] = [] if ended else [(END, False)]
        for m in messages:
            role = m.get("role")
            if role == "tool":
                author = f"functions.{m.get('name') or 'tool'}"
                pieces += [(f"<|start|>{author} to=assistant<|channel|>commentary<|message|>",
                            False), (m["content"], True), (END, False)]
            elif role == "user":
                pieces += [("<|start|>user<|message|>", False), (m["content"], True),
                           (END, False)]
            else:
                raise RendererRefused(f"gpt-oss: an env adds tool or user messages, got {role!r}")
        return encode_pieces(self.tokenizer, [*pieces, ("<|start|>assistant", False)])

    def stop_token_ids(self) -> tuple[int, ...]:
        return (self.call_id, self.return_id)

    def parse_calls(self, text: str) -> list[FamilyCall]:
        """Messages addressed ``to=functions.NAME`` (commentary, or analysis as some samples
        write them), their body JSON arguments."""
        calls = []
        for m in harmony_messages(text):
            if not (m.recipient or "").startswith("functions."):
                continue
            name, raw = m.recipient.split(".", 1)[1], text[m.start:m.end]
            body = m.body.strip()
            args, used, error = decode_json(body) if body else ({}, 0, None)
            if error is not None or used != len(body) or not isinstance(args, dict):
                calls.append(FamilyCall(name, {}, raw, m.start, m.end,
                                        "the call's message must be one JSON object"))
            else:
                calls.append(FamilyCall(name, args, raw, m.start, m.end))
        return calls

    def render_calls(self, calls: list[tuple[str, dict]]) -> str:
        out = f"<|channel|>analysis<|message|>I call {calls[0][0]}.{END}"
        for name, args in calls:
            out += (f"<|start|>assistant to=functions.{name}<|channel|>commentary "
                    f"<|constrain|>json<|message|>{json.dumps(args, ensure_ascii=False)}{CALL}")
            break  # one call per turn: the turn ends at <|call|>
        return out

    def render_final(self, text: str) -> str:
        """A turn answering in the final channel (reasoning first), as gpt-oss writes one."""
        return f"<|channel|>analysis<|message|>Done.{END}<|start|>assistant<|channel|>final" \
               f"<|message|>{text}{RETURN}"


def _tool(schema: dict) -> Any:
    import openai_harmony as oh

    fn = schema.get("function", schema)
    return oh.ToolDescription.new(fn["name"], fn.get("description", ""),
                                  parameters=fn.get("parameters"))
