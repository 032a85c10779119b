"""The serving render, encoded piece by piece: a chat API resends the whole conversation at
every call, and re-encoding all of it is most of a call's cost.

A fast tokenizer matches special tokens before anything else, so the text between two of them
is encoded on its own whatever surrounds it: the ids of the whole text are the ids of those
pieces, in order.  ``PieceRender`` renders the tokenizer's ``chat_template`` to text, splits it
at special tokens and encodes only the pieces it has not seen (the system prompt and tool
schemas every episode shares, and each earlier turn, are cached), giving exactly the ids
``tir_envs.chat.served.serving_renderer`` gives.  It applies only where that holds: a
tokenizer with a chat template whose special tokens neither strip nor are normalised;
otherwise ``serving_render`` returns the whole-text render.  gpt-oss and Mistral have no chat
template to trust: their library renders them (``library_families.py``).
"""

from __future__ import annotations

import re
from typing import Any

from tir_envs.chat.served import serving_renderer

#: tokens the piece cache holds (about 36 bytes each); it is cleared when a piece would pass it
CACHE_TOKENS = 1 << 20


def serving_render(renderer: Any) -> Any:
    """``(messages, tools) -> ids`` as a server renders them, as fast as it can be exact
    (gpt-oss and Mistral: through their own library, as their servers render them)."""
    from tir_envs.gateway.library_families import library_render

    library = library_render(renderer)
    if library is not None:
        return library
    tok = renderer.tokenizer
    if getattr(tok, "chat_template", None) and PieceRender.applies(tok):
        return PieceRender(renderer)
    return serving_renderer(renderer)


class PieceRender:
    """See the module docstring."""

    def __init__(self, renderer: Any):
        self.tokenizer = tok = renderer.tokenizer
        self.kwargs = {"enable_thinking": renderer.thinking == "on"} if renderer.thinking else {}
        specials = [a.content for a in tok.added_tokens_decoder.values() if a.special]
        self.special_ids = {s: tok.convert_tokens_to_ids(s) for s in specials}
        longest_first = sorted(specials, key=len, reverse=True)
        self.split = re.compile("(" + "|".join(map(re.escape, longest_first)) + ")")
        self.cache: dict[str, list[int]] = {}
        self.cached_tokens = 0
        # the Rust tokenizer itself where there is one: the ids ``encode`` gives without
        # transformers' per-call wrapping; its batch call (what ``encode`` runs) releases the
        # GIL, so a long render in a worker thread leaves the event loop free
        backend = getattr(tok, "backend_tokenizer", None)
        self._encode = (lambda text: backend.encode_batch([text], add_special_tokens=False)[0]
                        .ids) if backend is not None else \
            (lambda text: tok.encode(text, add_special_tokens=False))

    @staticmethod
    def applies(tok: Any) -> bool:
        added = list((getattr(tok, "added_tokens_decoder", None) or {}).values())
        return bool(added) and all(not (a.lstrip or a.rstrip or a.normalized or a.single_word)
                                   for a in added)

    def __call__(self, messages: list[dict], tools: list[dict] | None) -> list[int]:
        text = self.tokenizer.apply_chat_template(messages, tools=tools, tokenize=False,
                                                  add_generation_prompt=True, **self.kwargs)
        return self.encode(text)

    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        for piece in self.split.split(text):
            if not piece:
                continue
            special = self.special_ids.get(piece)
            if special is not None:
                out.append(special)
                continue
            ids = self.cache.get(piece)
            if ids is None:
                ids = self._encode(piece)
                if self.cached_tokens + len(ids) > CACHE_TOKENS:
                    self.cache.clear()
                    self.cached_tokens = 0
                self.cache[piece] = ids
                self.cached_tokens += len(ids)
            out += ids
        return out
