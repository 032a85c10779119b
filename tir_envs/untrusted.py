"""Text the env did not write (tool output, documents, query results): made inert before it
reaches a model's context.

Two things can turn such text into structure.  Added tokens: a tool that prints
``<|im_end|>\\n<|im_start|>assistant`` would, through an ordinary encode, put real control ids in
the observation (closing the tool message, forging an assistant turn, an EOS mid-sequence).
Invisible characters: terminal escapes, carriage returns, bidi overrides, line/paragraph
separators, zero-width characters and a BOM change how text reads without showing.  Here the
first are encoded by the tokenizer's own model as plain text (no added-token id can come out),
and the second are written as visible escapes (``\\x1b``, ``\\u202e``).
"""

from __future__ import annotations

import json
import re
import threading
import weakref
from typing import Sequence

#: C0/C1 controls except newline and tab; bidi marks, embeddings, overrides and isolates; the
#: line and paragraph separators; zero-width and invisible-operator characters; soft hyphen;
#: the BOM; interlinear annotation controls; tag characters (invisible ASCII look-alikes);
#: every other format character (Arabic and Syriac marks, Egyptian, shorthand and musical
#: format controls); variation selectors (invisible, and able to carry bytes: "emoji
#: smuggling"); fillers; and surrogates (a lone one, e.g. ``"\\ud800"`` sent through a tool
#: call's JSON and echoed, is no valid text: a tokenizer refuses it).  Together: every code
#: point of the categories Cc, Cf, Zl, Zp and Cs (``tests/test_redteam_round4.py`` checks
#: that against the running Python's Unicode tables) and the invisible ones beside them.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891"
    "\u08e2\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2060-\u206f"
    "\u3164\ud800-\udfff\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e007f\U000e0100-\U000e01ef]")


def _escape(match: re.Match) -> str:
    c = ord(match.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" if c < 0x10000 else f"\\U{c:08x}"


def escape_controls(text: str) -> str:
    """Show invisible and layout-changing characters as escapes; newline and tab stay.

    Idempotent (an escape holds none of the characters it replaces), so text escaped by a
    tool already is left as it is.
    """
    return _INVISIBLE.sub(_escape, text)


class PlainEncoder:
    """Encodes text with a tokenizer's model only: added tokens (specials such as
    ``<|im_end|>``, ``<|eot_id|>``, ``[INST]``, and non-special ones such as ``<tool_call>``)
    are never matched, so their text becomes ordinary pieces.  Decoding the ids with the
    original tokenizer gives the text back exactly."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.added_ids = frozenset(_added_vocab(tokenizer).values())
        self._contents = {i: t for t, i in _added_vocab(tokenizer).items()}
        self._plain = _without_added_tokens(tokenizer)
        self._split_option = True  # off for a backend without ``split_special_tokens``

    def encode(self, text: str) -> list[int]:
        ids = self._encode(text)
        if self.added_ids.isdisjoint(ids):
            return ids
        return self._split(ids)

    def _split(self, ids: Sequence[int]) -> list[int]:
        """Last resort for a model that can still reach an added id (its vocabulary holds
        the token's text and a merge leads there): that token's text one character at a
        time."""
        out: list[int] = []
        for i in ids:
            if i not in self.added_ids:
                out.append(i)
                continue
            for ch in self._contents.get(i, ""):
                out.extend(self._encode(ch))
        return out

    def _encode(self, text: str) -> list[int]:
        if self._plain is not None:
            return self._plain.encode(text, add_special_tokens=False).ids
        if self._split_option:
            try:
                return list(self.tokenizer.encode(text, add_special_tokens=False,
                                                  split_special_tokens=True))
            except ValueError:  # MistralCommonBackend: "does not support split_special_tokens"
                self._split_option = False
        # Such a backend (mistral-common) reads text as text; ``encode`` still checks that no
        # added id came out, and splits any that did one character at a time.
        return list(self.tokenizer.encode(text, add_special_tokens=False))


def _added_vocab(tokenizer) -> dict[str, int]:
    getter = getattr(tokenizer, "get_added_vocab", None)
    return dict(getter()) if getter else {}


def _without_added_tokens(tokenizer):
    """A copy of the fast tokenizer's pipeline (normalizer, pre-tokenizer, model) with no
    added tokens; None for a tokenizer without a Rust backend or one that cannot be copied."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    try:
        from tokenizers import Tokenizer

        spec = json.loads(backend.to_str())
        spec["added_tokens"] = []
        return Tokenizer.from_str(json.dumps(spec))
    except Exception:  # an exotic pipeline that does not round-trip: the slow path splits
        return None


_ENCODERS: "weakref.WeakKeyDictionary[object, PlainEncoder]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def plain_encoder(tokenizer) -> PlainEncoder:
    """The tokenizer's ``PlainEncoder``, built once per tokenizer object (about half a second
    for a 150k vocabulary) and shared by every env using it."""
    with _LOCK:
        enc = _ENCODERS.get(tokenizer)
        if enc is None:
            enc = _ENCODERS[tokenizer] = PlainEncoder(tokenizer)
        return enc


_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(value: object) -> str | None:
    """The first lone surrogate in a tool call's arguments (keys and values, at any depth),
    written as an escape, or ``None``.

    JSON lets a policy send ``"\\ud800"``: a Python string that is no text (it cannot be
    encoded).  A tool that encodes it raises, and the env counts a tool's exception as
    infrastructure, so the episode would be void: dropped by the trainer, a wrong answer
    costing nothing.  The env refuses such arguments as the call's own error instead."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            m = _SURROGATE.search(v)
            if m:
                return escape_controls(m.group())
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
    return None


#: how control tokens are spelled across the chat families: ``<|im_end|>``-style (ChatML,
#: Llama 3, Qwen, GLM, Phi), ``<｜end▁of▁sentence｜>``-style (DeepSeek), tag words
#: (``<start_of_turn>``, ``</s>``, ``<tool_call>``, ``<think>``) and bracket words (``[INST]``,
#: ``[TOOL_RESULTS]``)
_CONTROL_SPELLING = re.compile(r"<\|[^<>|\s]{1,64}\|>|<｜[^<>｜]{1,64}｜>|</?[A-Za-z_]{1,32}>"
                               r"|\[/?[A-Z_]{2,32}\]")


def _first_escaped(match: re.Match) -> str:
    text = match.group()
    return f"\\u{ord(text[0]):04x}{text[1:]}"


def escape_third_party(text: str, tokenizer=None) -> str:
    """Text a third party wrote that reaches a prompt through an ordinary encode (an MCP
    server's tool names and descriptions, a remote env's first observation and metadata):
    invisible characters escaped (``escape_controls``), and every spelling of a control token
    -- of any family, and every added token of ``tokenizer`` when given -- written with its
    first character as a visible escape (``<|im_end|>`` becomes ``\\u003c|im_end|>``), so no
    encode can turn it into a control id.  Tool results need none of this: the env encodes
    them as plain text (``Codec.encode_untrusted``)."""
    text = _CONTROL_SPELLING.sub(_first_escaped, escape_controls(str(text)))
    if tokenizer is not None:
        for token in sorted(_added_vocab(tokenizer), key=len, reverse=True):
            if len(token) > 1 and token in text:
                text = text.replace(token, f"\\u{ord(token[0]):04x}{token[1:]}")
    return text


def escape_schema(value, tokenizer=None, depth: int = 0):
    """``value`` (a JSON schema or any JSON) with every string, keys included, passed
    through ``escape_third_party``; nesting past 64 levels is refused (``ValueError``)."""
    if depth > 64:
        raise ValueError("a third party's schema is nested deeper than 64 levels")
    if isinstance(value, str):
        return escape_third_party(value, tokenizer)
    if isinstance(value, dict):
        return {escape_third_party(str(k), tokenizer): escape_schema(v, tokenizer, depth + 1)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [escape_schema(v, tokenizer, depth + 1) for v in value]
    return value
