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

from typing import Any, Sequence

from tir_envs.chat.renderer import ChatRenderer, FamilyCall, Message, Reasoning, \
    RendererRefused

#: family -> (renderers config class name, reasoning block or None, has a thinking switch)
RENDERERS_FAMILIES: dict[str, tuple[str, Reasoning | None, bool]] = {
    "qwen3": ("Qwen3RendererConfig", Reasoning("<think>", "</think>"), True),  # reference only
    "llama-3": ("Llama3RendererConfig", None, False),
    "deepseek-v3": ("DeepSeekV3RendererConfig", None, False),
    "glm-4.5": ("GLM45RendererConfig", Reasoning("<think>", "</think>"), True),
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
        before = list(context_ids) + list(completion_ids)
        out = self.impl.bridge_to_next_turn(list(context_ids), list(completion_ids),
                                            _wire(messages), tools=self._tools)
        if out is None:
            raise RendererRefused(f"the {self.family} renderer cannot extend this turn without "
                                  "re-rendering it")
        ids = list(out.token_ids)
        # Sampled tokens after the end of turn (a backend that ignored the stop ids): the
        # renderer drops them; the ledger keeps them, and the bridge goes on after them.
        keep = next((n for n in range(min(len(ids), len(before)), -1, -1)
                     if ids[:n] == before[:n]), 0)
        return ids[keep:] if keep < len(before) else ids[len(before):]

    def stop_token_ids(self) -> tuple[int, ...]:
        return tuple(self.impl.get_stop_token_ids())

    def parse_calls(self, text: str) -> list[FamilyCall]:
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
        if full[:len(prompt)] != prompt:
            raise RendererRefused(f"{self.family}: cannot isolate an assistant turn")
        turn, stops = list(full[len(prompt):]), set(self.stop_token_ids())
        end = next((i + 1 for i, t in enumerate(turn) if t in stops), len(turn))
        return self.tokenizer.decode(turn[:end], skip_special_tokens=False)


def _wire(messages: list[Message]) -> list[Message]:
    """Messages as ``renderers`` takes them (tool contents are strings, never re-parsed)."""
    return [{k: v for k, v in m.items() if v is not None} for m in messages]


