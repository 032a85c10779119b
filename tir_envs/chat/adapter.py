"""Renderers from PyPI ``renderers`` (Apache-2.0, extra ``chat``): Qwen3, Llama 3, DeepSeek V3,
GLM-4.5, and others it knows.

``renderers`` writes each family's template by hand, with a ``bridge_to_next_turn`` that keeps
sampled ids verbatim; this adapter puts it behind ``ChatRenderer``.  The bridge must start with
``context + completion`` exactly: when it cannot (it would re-render, or it cut sampled tokens)
the adapter raises ``RendererRefused`` instead of rewriting what the policy sampled.  The
thinking-retention policy is ``"all"``: an episode only ever adds tool messages, and the ledger
keeps every reasoning block the policy saw.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from tir_envs.chat.dates import LLAMA_DEFAULT, template_date

from tir_envs.chat.renderer import (ChatRenderer, FamilyCall, Message, Reasoning,
                                    RendererRefused, differing_span)
from tir_envs.untrusted import escape_controls, plain_encoder

#: what stands for a message's content in the render its glue is read from
_SENTINEL = "TIRUNTRUSTEDCONTENT"

#: family -> (renderers config class name, reasoning block or None, has a thinking switch)
RENDERERS_FAMILIES: dict[str, tuple[str, Reasoning | None, bool]] = {
    "qwen3": ("Qwen3RendererConfig", Reasoning("<think>", "</think>", "content", "qwen3"),
              True),  # reference only
    "llama-3": ("Llama3RendererConfig", None, False),
    "deepseek-v3": ("DeepSeekV3RendererConfig", None, False),
    # R1 always reasons (its generation prompt prefills ``<think>\n``); its template strips
    # earlier reasoning, which the ledger's "all" retention never does (bench --as-served does)
    "deepseek-r1": ("DeepSeekR1RendererConfig",
                    Reasoning("<think>", "</think>", "reasoning", "deepseek_r1"), False),
    "glm-4.5": ("GLM45RendererConfig", Reasoning("<think>", "</think>", "content", "glm45"),
                True),
}


def _require_renderers():
    try:
        import renderers  # noqa: F401
        from renderers import configs
    except ImportError:
        raise ImportError("this model family's renderer comes from PyPI 'renderers': "
                          "pip install 'tir-envs[chat]'") from None
    return configs


class RenderersAdapter(ChatRenderer):
    """A ``renderers`` renderer behind ``ChatRenderer`` (see the module docstring)."""

    renders_tools = True

    def __init__(self, tokenizer: Any, family: str, thinking: str | None = None):
        super().__init__(tokenizer)
        configs = _require_renderers()
        import renderers

        config_name, self.reasoning, switch = RENDERERS_FAMILIES[family]
        self.family = family
        kwargs: dict[str, Any] = {"thinking_retention": "all"}
        if family == "llama-3":  # the tokenizer's template's date (3.2: today), or the run's pin
            self.date = template_date(tokenizer, LLAMA_DEFAULT)
            kwargs["date_string"] = self.date.strftime("%d %b %Y")
        if switch:
            self.thinking = thinking or "on"
            kwargs["enable_thinking"] = self.thinking == "on"
        elif thinking is not None:
            raise ValueError(f"{family} has no thinking switch; leave thinking unset")
        try:
            self.impl = renderers.create_renderer(tokenizer,
                                                  getattr(configs, config_name)(**kwargs))
        except (AssertionError, KeyError, ValueError) as exc:
            raise ValueError(f"the {family} renderer does not fit this tokenizer (it lacks the "
                             f"family's special tokens: {exc}); pass the model's own tokenizer "
                             "or another renderer=") from None
        self._tools: list[dict] | None = None

    def prompt_ids(self, messages: list[Message], tools: list[dict] | None = None) -> list[int]:
        self._tools = tools or None
        return list(self.impl.render_ids(messages, tools=self._tools, add_generation_prompt=True))

    def bridge_ids(self, context_ids: Sequence[int], completion_ids: Sequence[int],
                   messages: list[Message]) -> list[int]:
        wire = _wire(messages)
        ids = self._bridge(context_ids, completion_ids, wire)
        for i, m in enumerate(wire):  # each message's content re-encoded as untrusted text
            if isinstance(m.get("content"), str) and m["content"]:
                marked = [*wire[:i], {**m, "content": f"{_SENTINEL}{i}"}, *wire[i + 1:]]
                ids = self._untrusted_region(ids, self._bridge(context_ids, completion_ids,
                                                               marked))
        return ids

    def _bridge(self, context_ids: Sequence[int], completion_ids: Sequence[int],
                wire: list[Message]) -> list[int]:
        before = list(context_ids) + list(completion_ids)
        out = self.impl.bridge_to_next_turn(list(context_ids), list(completion_ids), wire,
                                            tools=self._tools)
        if out is None:
            raise RendererRefused(f"the {self.family} renderer cannot extend this turn without "
                                  "re-rendering it")
        ids = list(out.token_ids)
        # Sampled tokens after the end of turn (a backend that ignored the stop ids): the
        # renderer drops them; the ledger keeps them, and the bridge goes on after them.
        keep = next((n for n in range(min(len(ids), len(before)), -1, -1)
                     if ids[:n] == before[:n]), 0)
        return ids[keep:] if keep < len(before) else ids[len(before):]

    def _untrusted_region(self, ids: list[int], marked: list[int]) -> list[int]:
        """``ids`` with one message's content re-encoded as untrusted text.  The render with
        that content replaced by a sentinel shares the family's glue before and after it; what
        differs is the content as the library encoded it (JSON-quoted where the template
        quotes it), which is decoded and encoded again with no added tokens, so tool output
        that spells a special token never becomes its control id (``Codec.encode_untrusted``),
        while ordinary text gets the same ids as before."""
        head, tail = differing_span(ids, marked)
        middle = self.tokenizer.decode(ids[head:len(ids) - tail], skip_special_tokens=False)
        return (ids[:head] + plain_encoder(self.tokenizer).encode(escape_controls(middle))
                + ids[len(ids) - tail:])

    def stop_token_ids(self) -> tuple[int, ...]:
        return tuple(self.impl.get_stop_token_ids())

    def parse_calls(self, text: str) -> list[FamilyCall]:
        calls = self._parse_calls(text)
        if calls or self.family != "llama-3":
            return calls
        # Llama 3's call is the whole turn as one JSON object; a protocol that asks for prose
        # first (RITE's <think>…</think>) puts it after that: the object starting a line
        # and running to the end of the turn is read as the call
        for at in (m.start() + 1 for m in re.finditer(r"\n\{", text)):
            found = self._parse_calls(text[at:])
            if found:
                for c in found:
                    c.start, c.end = c.start + at, c.end + at
                return found
        return []

    def _parse_calls(self, text: str) -> list[FamilyCall]:
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        parsed = self.impl.parse_response(list(ids), tools=self._tools)
        calls, pos = [], 0
        for c in parsed.tool_calls:
            start = text.find(c.raw, pos) if c.raw else -1
            start = max(start, pos)
            end = start + len(c.raw or "")
            pos = end
            ok = str(c.status) == "ok" and isinstance(c.arguments, dict)
            calls.append(FamilyCall(c.name, c.arguments if ok else {}, c.raw or "", start, end,
                                    None if ok else f"malformed tool call ({c.status})",
                                    call_id=c.id))
        return calls

    def render_calls(self, calls: list[tuple[str, dict]]) -> str:
        base = [{"role": "user", "content": "q"}]
        prompt = self.impl.render_ids(base, tools=self._tools, add_generation_prompt=True)
        msg: Message = {"role": "assistant", "content": "", "tool_calls": [
            {"id": f"call{i:05d}x", "type": "function",
             "function": {"name": name, "arguments": args}} for i, (name, args) in
            enumerate(calls)]}
        if self.reasoning is not None and self.thinking == "on":
            msg["reasoning_content"] = f"I call {calls[0][0]}."
        full = self.impl.render_ids(base + [msg], tools=self._tools)
        head, lead = len(prompt), ""
        if full[:head] != prompt:  # a prefilled reasoning opener (R1) the history drops:
            head = next(i for i, (a, b) in enumerate(zip(prompt, full + [None])) if a != b)
            prefill = self.tokenizer.decode(prompt[head:], skip_special_tokens=False)
            if self.reasoning is None or prefill.strip() != self.reasoning.open:
                raise RendererRefused(f"{self.family}: cannot isolate an assistant turn")
            lead = f"I call {calls[0][0]}.{self.reasoning.close}\n\n"  # the block's close
        turn, stops = list(full[head:]), set(self.stop_token_ids())
        end = next((i + 1 for i, t in enumerate(turn) if t in stops), len(turn))
        return lead + self.tokenizer.decode(turn[:end], skip_special_tokens=False)


def _wire(messages: list[Message]) -> list[Message]:
    """Messages as ``renderers`` takes them (tool contents are strings, never re-parsed)."""
    return [{k: v for k, v in m.items() if v is not None} for m in messages]

