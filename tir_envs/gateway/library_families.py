"""Serving gpt-oss and Mistral: families whose chat format is a library's, not a Jinja template.

A server for these models does not apply a ``chat_template``: vLLM renders gpt-oss with
``openai-harmony`` and Mistral with ``mistral-common``, so the gateway does the same
(``serving_render`` picks ``library_render`` for them).  Each request's neutral conversation
(``conversation.py``) is translated to the library's messages and encoded by it; the
completion is read back by the family's own rules.

* **gpt-oss** (harmony): an assistant turn is its ``analysis`` message (the reasoning), a
  ``commentary`` preamble when it both speaks and calls, one ``commentary`` message
  ``to=functions.NAME`` per call (``<|constrain|>json``, the arguments as ``json.dumps`` writes
  them) and otherwise a ``final`` message; a tool result is a ``functions.NAME`` message to the
  assistant (its name from the call it answers).  Harmony has its own rules for history: a
  ``final`` message in an earlier turn is written with ``<|end|>`` where the model sampled
  ``<|return|>``, and the analysis of turns before it is dropped.  A conversation that goes on
  after a final answer therefore forks by the template's rule, not the client's doing
  (``ledger.TEMPLATE_RULE``).  Within a tool loop (no final yet) harmony keeps every analysis
  message, so a client that sends reasoning back keeps the prefix.
* **Mistral** (mistral-common): the messages as ``ChatCompletionRequest`` holds them
  (``[TOOL_CALLS]`` with the call's id, ``[TOOL_RESULTS]``); mistral-common needs 9-character
  alphanumeric call ids, so a call whose id the policy did not write gets one of that shape.
"""

from __future__ import annotations

import json
import secrets
from typing import Any, Callable

from tir_envs.chat.reasoning import harmony_messages
from tir_envs.gateway.conversation import Message, Parsed, call_id, parse_completion

Render = Callable[[list[Message], "list[dict] | None"], list[int]]

#: families the gateway renders through their library, not a chat template
LIBRARY_FAMILIES = ("gpt-oss", "mistral")
_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def library_render(renderer: Any) -> Render | None:
    """``(messages, tools) -> ids`` through the family's library (``None``: not such a family)."""
    if renderer.family == "gpt-oss":
        return HarmonyServing(renderer)
    if renderer.family == "mistral":
        return MistralServing(renderer)
    return None


def parse_family(renderer: Any, text: str, prompt_text: str) -> Parsed:
    """The completion read by its family's rules: harmony's channels for gpt-oss, Mistral's
    ``[TOOL_CALLS]`` with 9-character ids, the others' reasoning block and call parser."""
    if renderer.family == "gpt-oss":
        return parse_harmony(renderer, text)
    if renderer.family == "mistral":  # mistral-common reads back only 9-character ids
        return parse_completion(renderer, text, prompt_text, mistral_call_id)
    return parse_completion(renderer, text, prompt_text)


def mistral_call_id() -> str:
    """A call id mistral-common accepts (9 letters or digits), unguessable like the others."""
    return "".join(secrets.choice(_ALNUM) for _ in range(9))


class HarmonyServing:
    """gpt-oss conversations through openai-harmony (see the module docstring)."""

    def __init__(self, renderer: Any):
        self.renderer = renderer

    def __call__(self, messages: list[Message], tools: list[dict] | None) -> list[int]:
        import openai_harmony as oh

        rest = list(messages)
        head = [rest.pop(0)] if rest and rest[0]["role"] == "system" else []
        out = list(self.renderer.conversation(head, tools).messages)
        names: dict[str, str] = {}
        for m in rest:
            out += self._message(oh, m, names)
        conv = oh.Conversation.from_messages(out)
        enc = self.renderer.encoding()
        return list(enc.render_conversation_for_completion(conv, oh.Role.ASSISTANT))

    @staticmethod
    def _message(oh: Any, m: Message, names: dict[str, str]) -> list[Any]:
        role, text = m["role"], m.get("content") or ""
        if role == "system":  # a system turn inside the conversation: the developer's
            dev = oh.DeveloperContent.new().with_instructions(text)
            return [oh.Message.from_role_and_content(oh.Role.DEVELOPER, dev)]
        if role == "user":
            return [oh.Message.from_role_and_content(oh.Role.USER, text)]
        if role == "tool":
            name = m.get("name") or names.get(m.get("tool_call_id") or "", "tool")
            author = oh.Author.new(oh.Role.TOOL, f"functions.{name}")
            return [oh.Message.from_author_and_content(author, text).with_channel("commentary")
                    .with_recipient("assistant")]
        out = []
        A = oh.Role.ASSISTANT
        if m.get("reasoning_content"):
            out.append(oh.Message.from_role_and_content(A, m["reasoning_content"])
                       .with_channel("analysis"))
        calls = m.get("tool_calls") or []
        if text:
            out.append(oh.Message.from_role_and_content(A, text)
                       .with_channel("commentary" if calls else "final"))
        for c in calls:
            fn = c["function"]
            names[c.get("id") or ""] = fn["name"]
            body = json.dumps(fn.get("arguments") or {}, ensure_ascii=False)
            out.append(oh.Message.from_role_and_content(A, body).with_channel("commentary")
                       .with_recipient(f"functions.{fn['name']}")
                       .with_content_type("<|constrain|>json"))
        return out


def parse_harmony(renderer: Any, text: str) -> Parsed:
    """A gpt-oss completion (its ``<|call|>``/``<|return|>`` removed) read as vLLM's
    ``openai_gptoss`` parser reads it: analysis is reasoning, calls are the messages
    ``to=functions.*``, content the ``final`` message (or, with none, the preambles)."""
    msgs = harmony_messages(text)
    reasoning = "".join(m.body for m in msgs if m.channel == "analysis" and not m.recipient)
    final = [m.body for m in msgs if m.channel == "final" and not m.recipient]
    said = [m.body for m in msgs if m.channel == "commentary" and not m.recipient]
    out = Parsed(text=text, reasoning=reasoning or None,
                 content="".join(final or said).strip())
    calls = renderer.parse_calls(text)
    good = [c for c in calls if c.name and not c.error]
    bad = [c for c in calls if c.error]
    if bad and not good:
        out.parse_error = bad[0].error
    out.tool_calls = [{"id": call_id(), "name": c.name,
                       "arguments": json.dumps(c.arguments or {}, ensure_ascii=False)}
                      for c in good]
    if not msgs and not good:  # no harmony framing at all: the text is what it said
        out.content = text.strip()
    return out


class MistralServing:
    """Mistral conversations through mistral-common (see the module docstring)."""

    def __init__(self, renderer: Any):
        self.renderer = renderer

    def __call__(self, messages: list[Message], tools: list[dict] | None) -> list[int]:
        from mistral_common.protocol.instruct.request import ChatCompletionRequest

        from tir_envs.chat.mistral import MISSING_CALL_ID

        out = []
        for m in messages:
            role = m["role"]
            if role == "assistant":
                calls = [{"id": c.get("id") or MISSING_CALL_ID, "type": "function",
                          "function": {"name": c["function"]["name"],
                                       "arguments": c["function"].get("arguments") or {}}}
                         for c in m.get("tool_calls") or []]
                msg: dict[str, Any] = {"role": "assistant", "content": m.get("content") or None}
                if calls:
                    msg["tool_calls"] = calls
                out.append(msg)
            elif role == "tool":
                out.append({"role": "tool", "content": m.get("content") or "",
                            "tool_call_id": m.get("tool_call_id") or MISSING_CALL_ID})
            else:
                out.append({"role": role, "content": m.get("content") or ""})
        request = ChatCompletionRequest(messages=out, tools=tools)
        return list(self.renderer.mistral.encode_chat_completion(request).tokens)
