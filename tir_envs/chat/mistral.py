"""Mistral, through ``mistral-common`` (Apache-2.0, extra ``chat``): Mistral's own encoder.

Mistral's chat format has no Jinja template to trust: ``mistral-common`` is the reference
serving stacks use.  The prompt is its ``encode_chat_completion`` (tools in
``[AVAILABLE_TOOLS]``); a tool result is its ``encode_tool_message`` (``[TOOL_RESULTS]{"content":
…, "call_id": …}[/TOOL_RESULTS]``, each result its own block, the content JSON-parsed when it is
JSON, as Mistral serves it).  Calls are ``[TOOL_CALLS][{"name", "arguments", "id"}]``; the
policy writes the call id and the result carries it back.  A call without a usable id gets
``MISSING_CALL_ID`` (mistral-common refuses a result without one).  The assistant turn ends with
``</s>``: when the policy did not sample it, the env adds it (loss mask 0).

Tool output is untrusted: a tool result whose encoding holds a control id its framing does not
(text spelling ``[INST]`` or ``</s>`` that a tokenizer matched as the control token) has its
content re-encoded as text, each control token's spelling one character at a time
(``_untrusted``).  mistral-common 1.13's Tekken encoder never matches control text, so this
changes nothing there; it makes the property the env's own, whatever the library version.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Sequence

from tir_envs.chat.renderer import (ChatRenderer, FamilyCall, Message, RendererRefused,
                                    differing_span)
from tir_envs.formats.json_calls import decode_json

TOOL_CALLS = "[TOOL_CALLS]"
MISSING_CALL_ID = "000000000"
_SENTINEL = "TIRUNTRUSTEDCONTENT"
_ID = re.compile(r"^[a-zA-Z0-9]{9}$")


class MistralRenderer(ChatRenderer):
    family = "mistral"
    renders_tools = True

    def __init__(self, tokenizer: Any, thinking: str | None = None):
        super().__init__(tokenizer)
        if thinking is not None:
            raise ValueError("this Mistral tokenizer has no thinking switch; leave thinking unset")
        from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

        inner = getattr(tokenizer, "tokenizer", None)
        if not isinstance(inner, MistralTokenizer):
            inner = mistral_common_for(tokenizer)
        self.mistral = inner
        self.instruct = inner.instruct_tokenizer
        self.eos = self.instruct.tokenizer.eos_id
        self.tool_calls_id = self.instruct.TOOL_CALLS
        self._tools: list[dict] | None = None

    def prompt_ids(self, messages: list[Message], tools: list[dict] | None = None) -> list[int]:
        from mistral_common.protocol.instruct.request import ChatCompletionRequest

        self._tools = tools or None
        request = ChatCompletionRequest(messages=messages, tools=self._tools)
        return list(self.mistral.encode_chat_completion(request).tokens)

    def bridge_ids(self, context_ids: Sequence[int], completion_ids: Sequence[int],
                   messages: list[Message]) -> list[int]:
        if self.eos in completion_ids[:-1]:
            raise RendererRefused("the completion goes on after </s>: stop at the end-of-turn id")
        out = [] if completion_ids and completion_ids[-1] == self.eos else [self.eos]
        for m in messages:
            if m.get("role") != "tool":
                raise RendererRefused(f"an episode adds only tool messages, got {m.get('role')!r}")
            out += self._untrusted(m)
        return out

    def _tool_ids(self, m: Message, content: str) -> list[int]:
        from mistral_common.protocol.instruct.messages import ToolMessage

        msg = ToolMessage(content=content, tool_call_id=m.get("tool_call_id") or MISSING_CALL_ID,
                          name=m.get("name"))
        return list(self.instruct.encode_tool_message(msg, False)[0])

    def _untrusted(self, m: Message) -> list[int]:
        """The tool message's ids, its content holding no control id: the render with a
        sentinel content gives the framing's own control ids; any more in the real render came
        from the content, which is then re-encoded as text between the same glue."""
        ids, glue = self._tool_ids(m, m["content"]), self._tool_ids(m, _SENTINEL)
        special = self.instruct.tokenizer.is_special
        if sorted(i for i in ids if special(i)) == sorted(i for i in glue if special(i)):
            return ids
        head, tail = differing_span(ids, glue)
        middle = self.tokenizer.decode(ids[head:len(ids) - tail], skip_special_tokens=False)
        return ids[:head] + self._plain(middle) + ids[len(ids) - tail:]

    def _plain(self, text: str) -> list[int]:
        """``text`` as ordinary tokens: a control id the encoder matched is replaced by its
        spelling, one character at a time."""
        inner = self.instruct.tokenizer
        out: list[int] = []
        for i in inner.encode(text, bos=False, eos=False):
            if not inner.is_special(i):
                out.append(i)
                continue
            for ch in inner.id_to_piece(i):
                out += [j for j in inner.encode(ch, bos=False, eos=False)
                        if not inner.is_special(j)]
        return out

    def stop_token_ids(self) -> tuple[int, ...]:
        return (self.eos,)

    def parse_calls(self, text: str) -> list[FamilyCall]:
        start = text.find(TOOL_CALLS)
        if start < 0:
            return []
        body_at = start + len(TOOL_CALLS)
        body = text[body_at:].removesuffix("</s>")
        items, used, error = decode_json(body.lstrip())
        if error is not None:
            return [FamilyCall(None, {}, text[start:], start, len(text),
                               f"invalid JSON after [TOOL_CALLS]: {error}")]
        end = body_at + (len(body) - len(body.lstrip())) + used
        items = items if isinstance(items, list) else [items]
        return [_call(item, text[start:end], start, end) for item in items]

    def render_calls(self, calls: list[tuple[str, dict]]) -> str:
        payload = [{"name": n, "arguments": a, "id": f"call{i:05d}"} for i, (n, a) in
                   enumerate(calls)]
        ids = [self.tool_calls_id] + self.instruct.tokenizer.encode(
            json.dumps(payload, ensure_ascii=False), bos=False, eos=False) + [self.eos]
        return self.tokenizer.decode(ids, skip_special_tokens=False)


#: files mistral-common loads, as Mistral's Hugging Face folders ship them beside tokenizer.json
_MISTRAL_FILES = ("tekken.json", "tokenizer.model.v7m1", "tokenizer.model.v7", "tokenizer.model.v3",
                  "tokenizer.model")


def mistral_common_for(tokenizer: Any) -> Any:
    """mistral-common's tokenizer for a Mistral tokenizer loaded the usual Hugging Face way
    (a fast tokenizer from ``tokenizer.json``): built from the Tekken or SentencePiece file
    beside it (its ``vocab_file``, or the folder it was loaded from), and checked to give the
    same ids as the tokenizer the env holds (the ledger's ids come from that one)."""
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    folder = Path(str(getattr(tokenizer, "name_or_path", "") or "."))
    init = getattr(tokenizer, "init_kwargs", None) or {}
    candidates = [getattr(tokenizer, "vocab_file", None), init.get("vocab_file"),
                  *(folder / name for name in _MISTRAL_FILES)]
    path = next((Path(str(c)) for c in candidates if c and Path(str(c)).is_file()), None)
    if path is None:
        raise TypeError("the Mistral renderer needs Mistral's own vocabulary file for its chat "
                        f"format: none of {', '.join(_MISTRAL_FILES)} next to this tokenizer "
                        f"({folder}). Load the model's folder as downloaded (tekken.json sits "
                        "beside tokenizer.json), or pass a mistral-common tokenizer "
                        "(tir_envs.chat.vocab.mistral_tokenizer())")
    inner = MistralTokenizer.from_file(str(path))
    probe = "Paris, é日本 [TOOL_CALLS] 42"
    plain = inner.instruct_tokenizer.tokenizer
    controls = {"[TOOL_CALLS]": inner.instruct_tokenizer.TOOL_CALLS, "</s>": plain.eos_id}
    if list(tokenizer.encode(probe.replace(" [TOOL_CALLS]", ""), add_special_tokens=False)) != \
            plain.encode(probe.replace(" [TOOL_CALLS]", ""), bos=False, eos=False) or \
            any(tokenizer.convert_tokens_to_ids(t) != i for t, i in controls.items()):
        raise TypeError(f"{path} does not give this tokenizer's ids: pass the tokenizer of the "
                        "same Mistral model")
    return inner


def _call(item: Any, raw: str, start: int, end: int) -> FamilyCall:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        return FamilyCall(None, {}, raw, start, end, "a tool call needs a 'name' string")
    args = item.get("arguments", {})
    if isinstance(args, str):
        text = args.strip()
        args, used, error = decode_json(text)
        if error is not None or used != len(text):
            return FamilyCall(item["name"], {}, raw, start, end, "'arguments' is not JSON")
    if not isinstance(args, dict):
        return FamilyCall(item["name"], {}, raw, start, end, "'arguments' must be an object")
    call_id = item.get("id")
    call_id = call_id if isinstance(call_id, str) and _ID.match(call_id) else None
    return FamilyCall(item["name"], args, raw, start, end, call_id=call_id)
