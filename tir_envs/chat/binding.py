"""``ChatBinding``: everything chat mode adds to an env, in one object the env calls.

The env stays a ledger keeper: the binding renders the prompt (with ``tools=`` when the family
renders them and the protocol has schemas), turns an observation into the family's env tokens
(``bridge_ids``; the observation budget cuts the tool message's content, never the framing),
states the stop ids, blanks reasoning blocks before a protocol reads an action, and closes a
reasoning block the policy left open before an observation written into the same turn.
"""

from __future__ import annotations

import copy
from typing import Any, Sequence

from tir_envs.chat.calls import FamilyFormat
from tir_envs.chat.reasoning import blank_reasoning, ends_inside, split_reasoning
from tir_envs.chat.registry import resolve_renderer
from tir_envs.chat.renderer import ChatRenderer, Message
from tir_envs.chat.template import TemplateRenderer
from tir_envs.formats.base import ToolCall
from tir_envs.untrusted import escape_controls


class ChatBinding:
    """Chat mode of one env: a renderer, the protocol it adapted, and the env-side rules."""

    def __init__(self, renderer: ChatRenderer, codec: Any, role: str | None):
        self.renderer, self.codec, self.role = renderer, codec, role
        self.native = False  # the protocol's tools are rendered and parsed by the family
        self._opens = False  # the context ends inside a reasoning block (a prefilled opener)
        self.last_messages: list[Message] = []
        # the episode as a chat API holds it (``tir_envs.chat.served``): messages, tools
        self.conversation: list[Message] = []
        self.served_tools: list[dict] | None = None
        self._served_render: Any = None
        self._stop_texts: tuple[str, ...] | None = None

    @classmethod
    def build(cls, tokenizer: Any, codec: Any, protocol: Any, renderer: Any = None,
              thinking: str | None = None, role: str | None = None) -> "ChatBinding":
        return cls(resolve_renderer(tokenizer, codec, renderer, thinking, role), codec, role)

    # -- the protocol ------------------------------------------------------------------
    def adapt(self, protocol: Any) -> Any:
        """The protocol as this family speaks it: a copy whose calls are in the family's
        syntax when the family renders tools and the protocol declares schemas (RITE,
        ToolUse)."""
        schemas = protocol.tool_schemas()
        if not (self.renderer.renders_tools and schemas):
            return protocol
        adapted = copy.copy(protocol)
        adapted.format = FamilyFormat(self.renderer,
                                      getattr(protocol.format, "argument_names", None))
        adapted.native_tools = True
        self.native = True
        return adapted

    # -- the prompt --------------------------------------------------------------------
    def prompt_ids(self, messages: list[Message], schemas: list[dict] | None) -> list[int]:
        tools = schemas if self.native else None
        ids = self.renderer.prompt_ids(messages, tools)
        self._opens = self._opens_reasoning(ids)
        self.conversation, self.served_tools = list(messages), tools
        return ids

    # -- serving's view (``tir_envs.chat.served``) ---------------------------------------
    def serving_render(self) -> Any:
        """``(messages, tools) -> ids`` as a server renders them, made once (an error when the
        family has no serving template)."""
        if self._served_render is None:
            from tir_envs.chat.served import serving_renderer
            self._served_render = serving_renderer(self.renderer)
        return self._served_render

    def served_ids(self) -> list[int]:
        """The conversation so far as a server would render it, generation prompt included."""
        return self.serving_render()(self.conversation, self.served_tools)

    # -- a turn ------------------------------------------------------------------------
    def visible(self, text: str) -> str:
        """The action as protocols read it: reasoning blanked by the family's rule
        (``tir_envs.chat.reasoning``), the same rule the bridge closes a block by."""
        r = self.renderer.reasoning
        if r is None:
            return text
        return blank_reasoning(text, r, self._opens, self.ended(text))

    def ended(self, text: str) -> bool:
        """Whether the policy ended the turn itself (its text ends with an end-of-turn id's
        text); otherwise the env closes what it left open."""
        if self._stop_texts is None:
            self._stop_texts = tuple(t for t in (self.codec.decode([i]) for i in
                                                 self.renderer.stop_token_ids()) if t)
        return text.rstrip().endswith(self._stop_texts) if self._stop_texts else False

    def split(self, text: str) -> Any:
        """``(reasoning, content, spans)`` of an action by the family's rule."""
        return split_reasoning(text, self.renderer.reasoning, self._opens, self.ended(text))

    @property
    def opens_reasoning(self) -> bool:
        """Whether the context ends inside a reasoning block (a prefilled opener)."""
        return self._opens

    def reasoning_left_open(self, text: str) -> bool:
        r = self.renderer.reasoning
        return r is not None and ends_inside(text, r, self._opens)

    def stop_token_ids(self) -> tuple[int, ...]:
        return self.renderer.stop_token_ids()

    def frames_turns(self) -> bool:
        """Whether observations come back as messages (the family's framing) rather than as
        text inside the assistant turn."""
        return self.role is not None

    def close_reasoning_ids(self, action_text: str) -> list[int]:
        """For an observation written into the same turn: the family's reasoning close when the
        action left a block open (env tokens), so the observation is never inside it."""
        left_open = self.reasoning_left_open(action_text)
        self._opens = False
        return self.codec.encode(self.renderer.reasoning.close) if left_open else []

    def messages(self, calls: Sequence[ToolCall], texts: Sequence[str], body: str) -> list[Message]:
        """The env turn's messages; tool output with invisible characters escaped
        (``tir_envs.untrusted``), as every observation is."""
        if self.native and calls and len(calls) == len(texts):
            out = self.renderer.tool_messages(calls, texts)
        else:
            out = [{"role": self.role, "content": body}]
        return [{**m, "content": escape_controls(m["content"])} for m in out]

    def observation_ids(self, context_ids: Sequence[int], completion_ids: Sequence[int],
                        messages: list[Message], budget: int) -> tuple[list[int], int]:
        """The env tokens after a completion, and how many content tokens the budget cut.

        The cut is measured in one unit, the family's own: the tokens the longest content
        takes inside the framed turn (the bridge with it, less the bridge with it emptied),
        which is not what the raw text encodes to where the family escapes it (Llama 3 and
        Mistral JSON-quote a tool output: a newline is two characters there).  That content
        is cut in proportion and the framed whole measured again, until it fits."""
        ids = self.renderer.bridge_ids(context_ids, completion_ids, messages)
        dropped = 0
        for _ in range(4):
            excess = len(ids) - budget
            if excess <= 0:
                break
            k = max(range(len(messages)), key=lambda i: len(messages[i]["content"]))
            emptied = [*messages[:k], {**messages[k], "content": ""}, *messages[k + 1:]]
            framed = len(ids) - len(self.renderer.bridge_ids(context_ids, completion_ids,
                                                             emptied))
            content, cut = self._cut(messages[k]["content"], framed - excess, framed)
            if not cut:
                break
            dropped += cut
            messages = [*messages[:k], {**messages[k], "content": content}, *messages[k + 1:]]
            ids = self.renderer.bridge_ids(context_ids, completion_ids, messages)
        self._opens = self._opens_reasoning(list(context_ids) + list(completion_ids) + ids)
        self.last_messages = messages  # what was framed (after the budget's cut), for checks
        self.conversation += [self._assistant(completion_ids), *messages]
        return ids, dropped

    def _assistant(self, completion_ids: Sequence[int]) -> Message:
        """The sampled turn as a chat client sends it back: its text, end-of-turn id dropped."""
        ids = list(completion_ids)
        if ids and ids[-1] in self.renderer.stop_token_ids():
            ids = ids[:-1]
        return {"role": "assistant", "content": self.codec.decode(ids)}

    def _cut(self, text: str, room: int, framed: int) -> tuple[str, int]:
        """``text`` cut in the middle (head and tail kept, a marker between) so that it takes
        about ``room`` of the ``framed`` tokens it takes now in the family's framing; cut at
        whole characters (a character the cut splits is dropped, never sent as a replacement
        character).  Returns the text and how many of its tokens went."""
        body = self.codec.encode_untrusted(text)
        marker = "\n...[truncated]...\n"
        scale = len(body) / max(framed, 1)  # raw tokens per framed token of this content
        keep = int(max(room, 0) * scale) - len(self.codec.encode(marker))
        keep = max(min(keep, len(body) - 1), 0)
        if keep >= len(body):
            return text, 0
        head = (keep + 1) // 2
        tail = keep - head
        head_text = self.codec.decode(body[:head]).rstrip("\ufffd")
        tail_text = self.codec.decode(body[len(body) - tail:]).lstrip("\ufffd") if tail else ""
        return head_text + marker + tail_text, len(body) - head - tail

    def frame(self, body: str, action_text: str) -> str:
        """The text an observation body becomes (protocols fitting results to a budget)."""
        if isinstance(self.renderer, TemplateRenderer):
            return self.renderer.frame(body, action_text)
        return body

    def _opens_reasoning(self, ids: Sequence[int]) -> bool:
        r = self.renderer.reasoning
        if r is None or not ids:
            return False
        tail = self.codec.decode(list(ids[-8:]))
        return tail.rstrip().endswith(r.open)
