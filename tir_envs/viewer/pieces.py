"""Token ids to the exact text each token adds, so a page can show token boundaries.

Decoding ids one by one is wrong for byte-level BPE: a character split over two tokens decodes to
two replacement marks.  Here each token's bytes go through one incremental UTF-8 decoder, so a
token shows the characters it completes and the pieces always concatenate to the decoded text.
Tokenizers that are not byte-level fall back to decoding growing prefixes (exact, slower).
"""

from __future__ import annotations

import codecs
import functools
from typing import Any, Sequence


@functools.lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """The GPT-2 byte-level alphabet, inverted: printable stand-in character -> byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    codes, n = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(printable, codes)}


class TokenPieces:
    """Splits id sequences into per-token text for one tokenizer (see the module docstring)."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self._special = set(getattr(tokenizer, "all_special_tokens", []) or [])
        added = getattr(tokenizer, "get_added_vocab", None)
        self._added = set(added()) if callable(added) else set()
        self._byte_level = self._detect_byte_level()
        self._bytes: dict[str, bytes] = {}  # token -> its bytes: a long run repeats its tokens

    def _detect_byte_level(self) -> bool:
        sample = self.tokenizer.convert_ids_to_tokens([self.tokenizer.convert_tokens_to_ids("Ġ")]) \
            if "Ġ" in getattr(self.tokenizer, "get_vocab", dict)() else []
        return bool(sample) and sample[0] == "Ġ"

    def _token_bytes(self, token: str) -> bytes:
        found = self._bytes.get(token)
        if found is None:
            found = self._bytes[token] = self._decode_token(token)
        return found

    def _decode_token(self, token: str) -> bytes:
        if token in self._added or token in self._special:
            return token.encode("utf-8")
        table = _byte_decoder()
        try:
            return bytes(table[ch] for ch in token)
        except KeyError:  # not a byte-level symbol: take it literally
            return token.encode("utf-8")

    def pieces(self, ids: Sequence[int]) -> list[str]:
        """One string per id; ``"".join(pieces(ids))`` is the decoded text."""
        ids = [int(i) for i in ids]
        if not ids:
            return []
        if not self._byte_level:
            return self._by_prefix(ids)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        tokens = self.tokenizer.convert_ids_to_tokens(ids)
        out = [decoder.decode(self._token_bytes(t or "")) for t in tokens]
        out[-1] += decoder.decode(b"", final=True)
        return out

    def _by_prefix(self, ids: list[int]) -> list[str]:
        out, previous = [], ""
        for n in range(1, len(ids) + 1):
            text = self.tokenizer.decode(ids[:n], skip_special_tokens=False,
                                         clean_up_tokenization_spaces=False)
            keep = len(previous) if text.startswith(previous) else 0
            out.append(text[keep:])
            previous = text
        return out
