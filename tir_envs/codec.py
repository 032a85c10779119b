"""Token bookkeeping: the codec (fast exact encode/decode), retokenization drift, chat glue.

Observation text is always encoded on its own, without special tokens added, and appended
after the policy's ids; policy ids are never decoded and re-encoded.  Text the env did not
write goes through ``encode_untrusted``: added tokens split as plain text, invisible characters
escaped (``tir_envs.untrusted``), so tool output can never produce a control id.  ``Codec`` calls the Rust
tokenizer directly when it can, which keeps a no-tool ``step`` cheap.
"""

from __future__ import annotations

import re
from typing import Sequence

from tir_envs.untrusted import escape_controls, plain_encoder

#: characters from which ``Codec.encode`` lets other threads run while the Rust tokenizer
#: works (its batch call releases the GIL; the single call holds it: 4 s for 1 MB)
RELEASE_GIL_FROM = 4096
_SENTINEL_A = "\x00ASSISTANT-SENTINEL\x00"
_SENTINEL_U = "\x00OBSERVATION-SENTINEL\x00"


class Codec:
    """Encode text to ids (no special tokens added) and decode ids to text, exactly."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self._backend = getattr(tokenizer, "backend_tokenizer", None)
        self.vocab_size = len(tokenizer)
        eos = getattr(tokenizer, "eos_token", None)
        self.eos_text: str | None = eos if isinstance(eos, str) else None

        self._controls = _mistral_controls(tokenizer) if self._backend is None else None

    def encode(self, text: str) -> list[int]:
        """The env's own text to ids: a control token's text (``<|im_end|>``, ``</s>``) is its
        id in every family, as the tokenizer's template encodes it (mistral-common's backend
        alone reads ``</s>`` as text: its controls are matched here)."""
        if self._backend is not None:
            if len(text) >= RELEASE_GIL_FROM:  # the same ids; other threads run meanwhile
                return self._backend.encode_batch([text], add_special_tokens=False)[0].ids
            return self._backend.encode(text, add_special_tokens=False).ids
        if self._controls is not None:
            return self._encode_with_controls(text)
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def _encode_with_controls(self, text: str) -> list[int]:
        pattern, ids = self._controls
        out, pos = [], 0
        for m in pattern.finditer(text):
            if m.start() > pos:
                out += self.tokenizer.encode(text[pos:m.start()], add_special_tokens=False)
            out.append(ids[m.group()])
            pos = m.end()
        if pos < len(text):
            out += self.tokenizer.encode(text[pos:], add_special_tokens=False)
        return list(out)

    def drift(self, ledger_ids: Sequence[int]) -> int:
        """The ledger's drift: how far it is from a fresh encode of its own text (``drift``)."""
        return drift(ledger_ids, self.encode(self.decode(ledger_ids)))

    def encode_untrusted(self, text: str) -> list[int]:
        """Ids for text the env did not write (tool output, documents, rows): no added-token
        id (``<|im_end|>``, ``<|eot_id|>``, ``[INST]``, ``<tool_call>``) can come out, and
        bidi controls, line separators, zero-width characters and the BOM are escaped like
        the other control characters.  Renderers of env turns use it for every untrusted
        part and ``encode`` for their own glue."""
        return plain_encoder(self.tokenizer).encode(escape_controls(text))

    def decode(self, ids: Sequence[int]) -> str:
        if self._backend is not None:
            return self._backend.decode(list(ids), skip_special_tokens=False)
        return self.tokenizer.decode(list(ids), skip_special_tokens=False,
                                     clean_up_tokenization_spaces=False)

    def render_chat(self, messages: list[dict[str, str]]) -> str:
        """The prompt text: messages through the tokenizer's chat template, ready for the
        assistant's first token."""
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError(
                "the tokenizer has no chat_template; set tokenizer.chat_template, or create the "
                "env with chat=False to use the raw prompt text")
        return self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                  add_generation_prompt=True)

    def chat_glue(self, role: str = "user") -> tuple[str, str]:
        """Text the chat template puts around a new ``role`` message inside an episode.

        Returns ``(before, after)``: ``before`` closes the assistant turn and opens the
        ``role`` turn, ``after`` closes it and opens the next assistant turn.  Found by
        rendering a conversation with sentinel contents, so it follows any template.
        """
        messages = [{"role": "user", "content": "q"},
                    {"role": "assistant", "content": _SENTINEL_A},
                    {"role": role, "content": _SENTINEL_U}]
        text = self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                  add_generation_prompt=True)
        a = text.find(_SENTINEL_A)
        u = text.find(_SENTINEL_U)
        if a < 0 or u < 0:
            raise ValueError(f"the chat template drops {role!r} message contents; "
                             "use a template that renders them or chat=False")
        return text[a + len(_SENTINEL_A):u], text[u + len(_SENTINEL_U):]


def drift(ledger_ids: Sequence[int], fresh_ids: Sequence[int]) -> int:
    """How many ids differ between the ledger and a fresh encode of the same text.

    Common prefix and suffix are matched; what is left in the middle (the longer side) is
    the drift.  0 means the ledger is exactly what a tokenizer would produce from the text.
    """
    n, m = len(ledger_ids), len(fresh_ids)
    p = 0
    while p < n and p < m and ledger_ids[p] == fresh_ids[p]:
        p += 1
    s = 0
    while s < n - p and s < m - p and ledger_ids[n - 1 - s] == fresh_ids[m - 1 - s]:
        s += 1
    return max(n - p - s, m - p - s)


def truncate_middle(ids: list[int], limit: int, marker_ids: list[int]) -> tuple[list[int], int]:
    """Keep the head and tail of ``ids`` within ``limit`` tokens, the marker in between.

    Returns ``(ids, dropped)``.  The head gets the larger half: tool output usually opens with
    what matters (the result) and ends with what explains it (a traceback's last line).
    """
    if len(ids) <= limit:
        return ids, 0
    room = max(limit - len(marker_ids), 0)
    head = (room + 1) // 2
    tail = room - head
    kept = ids[:head] + marker_ids + (ids[len(ids) - tail:] if tail else [])
    return kept, len(ids) - head - tail


def _mistral_controls(tokenizer) -> tuple[re.Pattern, dict[str, int]] | None:
    """``(pattern, ids)`` of the named control tokens of a mistral-common backend (``</s>``,
    ``[INST]``, ``[TOOL_CALLS]``, ...), or ``None`` for any other tokenizer."""
    inner = getattr(getattr(getattr(tokenizer, "tokenizer", None), "instruct_tokenizer", None),
                    "tokenizer", None)
    if inner is None or not hasattr(inner, "num_special_tokens"):
        return None
    pieces = {inner.id_to_piece(i): i for i in range(inner.num_special_tokens)}
    pieces = {t: i for t, i in pieces.items() if t and not t.startswith("<SPECIAL_")}
    pattern = re.compile("|".join(re.escape(t) for t in sorted(pieces, key=len, reverse=True)))
    return pattern, pieces
