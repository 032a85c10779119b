"""A tokenizer's own chat template, for families no renderer knows, used only when proven.

The glue around an env message is found by rendering sentinel contents.
That is exact only if the template is prefix-stable for the episode's shape: rendering one more
turn must extend the text, never rewrite it, and the glue must be the same at every turn.
``probe_template`` renders a three-turn conversation and checks both; ``make()`` refuses a
template that fails (naming ``renderer=`` and the families that have renderers).
"""

from __future__ import annotations

from typing import Any, Sequence

from tir_envs.chat.renderer import ChatRenderer, Message
from tir_envs.chat.seams import encode_pieces

_A = "\x00ASSISTANT-{}\x00"
_U = "\x00OBSERVATION-{}\x00"


_PROBED: dict[tuple[int, str, str], tuple[str, str] | str] = {}


def probe_template(tokenizer: Any, role: str) -> tuple[str, str] | str:
    """``(before, after)``, the glue around a ``role`` message, or why the template is not
    prefix-stable for an episode's shape (user, then assistant/``role`` turns).  Remembered
    per tokenizer, template and role: every env of a run shares one probe."""
    key = (id(tokenizer), str(getattr(tokenizer, "chat_template", None)), role)
    if key not in _PROBED:
        _PROBED[key] = _probe(tokenizer, role)
    return _PROBED[key]


def _probe(tokenizer: Any, role: str) -> tuple[str, str] | str:
    if not getattr(tokenizer, "chat_template", None):
        return "the tokenizer has no chat_template"
    render = tokenizer.apply_chat_template
    msgs: list[Message] = [{"role": "user", "content": "q"}]
    try:
        prompt = render(msgs, tokenize=False, add_generation_prompt=True)
        texts, glues = [prompt], []
        for k in range(2):
            msgs = msgs + [{"role": "assistant", "content": _A.format(k)},
                           {"role": role, "content": _U.format(k)}]
            texts.append(render(msgs, tokenize=False, add_generation_prompt=True))
    except Exception as exc:  # noqa: BLE001 - a template's own refusal is the finding
        return f"the template refuses the conversation ({type(exc).__name__}: {exc})"
    for k in range(2):
        text, a, u = texts[k + 1], _A.format(k), _U.format(k)
        i, j = text.find(a), text.find(u)
        if i < 0 or j < 0:
            return (f"the template transforms message contents (a {role!r} or assistant "
                    "content does not appear verbatim: tojson, trimming, or it drops them)")
        if not text.startswith(texts[k]) or text[len(texts[k]):i]:
            return "the template re-renders history (a longer conversation rewrites the prefix)"
        glues.append((text[i + len(a):j], text[j + len(u):]))
    if glues[0] != glues[1]:
        return "the glue around an env message differs from turn to turn"
    return glues[0]


class TemplateRenderer(ChatRenderer):
    """A proven chat template: the prompt through ``apply_chat_template``, env turns inside the
    sentinel glue.  An end-of-turn the policy already sampled (``<|im_end|>``, GLM's
    ``<|observation|>``) is not repeated."""

    family = "template"

    def __init__(self, tokenizer: Any, codec: Any, glue: tuple[str, str] | None):
        super().__init__(tokenizer)
        self.codec = codec
        self.glue = glue
        self._stops: tuple[int, ...] | None = None

    def prompt_ids(self, messages: list[Message], tools: list[dict] | None = None) -> list[int]:
        return self.codec.encode(self.codec.render_chat(messages))

    def frame(self, body: str, action_text: str) -> str:
        if not self.glue:
            return body
        before, after = self.glue
        for end in self.end_texts():
            if action_text.endswith(end) and before.startswith(end):
                before = before[len(end):]
                break
        return before + body + after

    def bridge_ids(self, context_ids: Sequence[int], completion_ids: Sequence[int],
                   messages: list[Message]) -> list[int]:
        """Glue and body encoded as the template's one string is (``encode_pieces``: the
        stretch across a seam is one BPE run), the body never giving a control id."""
        action = self.codec.decode(completion_ids)
        before, after = self.frame("\x00", action).split("\x00")
        body = "".join(m["content"] for m in messages)
        return encode_pieces(self.tokenizer, [(before, False), (body, True), (after, False)])

    def end_texts(self) -> list[str]:
        """Texts of the ids that end a turn: the EOS, and any special token the glue opens
        with (``<|observation|>``, ``<|im_end|>``)."""
        out = [self.codec.eos_text] if self.codec.eos_text else []
        if self.glue:
            out += [t for t in _special_texts(self.tokenizer)
                    if t and self.glue[0].startswith(t) and t not in out]
        return out

    def stop_token_ids(self) -> tuple[int, ...]:
        if self._stops is None:  # read at every step (GenerationLimits): found once
            self._stops = self._find_stops()
        return self._stops

    def _find_stops(self) -> tuple[int, ...]:
        ids = []
        for text in self.end_texts():
            tid = self.tokenizer.convert_tokens_to_ids(text)
            if isinstance(tid, int) and tid >= 0 and tid not in ids:
                ids.append(tid)
        return tuple(ids)


def _special_texts(tokenizer: Any) -> list[str]:
    """Texts of the tokenizer's special tokens, added ones included (``all_special_tokens``
    lists only the named ones: EOS, PAD, ...)."""
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    texts = [t.content for t in added.values() if getattr(t, "special", False)]
    return texts + [t for t in getattr(tokenizer, "all_special_tokens", []) or []
                    if t not in texts]
