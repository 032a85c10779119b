"""Encoding an env turn the way its template's text is encoded: glue and content together.

A chat template produces one string and a tokenizer encodes it whole: it splits the string at
its added tokens (``<|im_end|>``, ``<tool_response>`` where the vocabulary has it) and runs
the BPE over each stretch between them.  Encoding the glue and a tool output apart gives other
ids wherever a stretch crosses the seam: Qwen2.5's ``…France.`` + ``\\n</tool_response>`` is
``France`` ``.\\n`` ``</`` as one string but ``France`` ``.`` ``\\n`` ``</`` apart.
``encode_pieces`` does what the whole-string encode does, with one difference that is the
point: only the env's own text (the glue) can produce an added-token id; the content's
stretches go through the plain encoder (``tir_envs.untrusted``), so tool output that spells
``<|im_end|>`` stays text.
"""

from __future__ import annotations

import re
import weakref
from typing import Any, Sequence

from tir_envs.untrusted import escape_controls, plain_encoder

#: (text, untrusted) pieces of a turn, in order
Pieces = Sequence[tuple[str, bool]]

_SPLITTERS: "weakref.WeakKeyDictionary[Any, tuple[re.Pattern | None, dict[str, int]]]" = \
    weakref.WeakKeyDictionary()


def _splitter(tokenizer: Any) -> tuple[re.Pattern | None, dict[str, int]]:
    key = tokenizer
    if key not in _SPLITTERS:
        added = dict(tokenizer.get_added_vocab()) if hasattr(tokenizer, "get_added_vocab") \
            else {}
        added = {t: i for t, i in added.items() if t}
        pattern = re.compile("|".join(re.escape(t) for t in
                                      sorted(added, key=len, reverse=True))) if added else None
        _SPLITTERS[key] = (pattern, added)
    return _SPLITTERS[key]


def encode_pieces(tokenizer: Any, pieces: Pieces) -> list[int]:
    """Ids of the concatenated pieces as one encode of the whole text would give them, added
    tokens matched in trusted pieces only (see the module docstring).  Untrusted pieces are
    escaped (``escape_controls``) first."""
    pattern, added = _splitter(tokenizer)
    pieces = [(escape_controls(t) if u else t, u) for t, u in pieces]
    if pattern is None or not any(u and pattern.search(t) for t, u in pieces):
        # no content spells an added token: the whole-string encode is the answer (one call)
        return _encode_whole(tokenizer, "".join(t for t, _ in pieces))
    plain = plain_encoder(tokenizer)
    out: list[int] = []
    run: list[str] = []
    for text, untrusted in pieces:
        if untrusted:
            run.append(text)
            continue
        pos = 0
        for m in (pattern.finditer(text) if pattern else ()):
            run.append(text[pos:m.start()])
            if any(run):
                out += plain.encode("".join(run))
            run = []
            out.append(added[m.group()])
            pos = m.end()
        run.append(text[pos:])
    if any(run):
        out += plain.encode("".join(run))
    return out


def _encode_whole(tokenizer: Any, text: str) -> list[int]:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return backend.encode(text, add_special_tokens=False).ids
    return list(tokenizer.encode(text, add_special_tokens=False))
