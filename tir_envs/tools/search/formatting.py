"""Search results as the policy reads them, the Search-R1 way, and cutting text to a token budget.

Each hit becomes ``Doc i(Title: <first line of contents>) <rest of contents>`` on its own line,
best first; the title line is kept verbatim (the wiki-18 corpus writes it in quotes), so a
model trained with Search-R1 sees exactly the layout it was trained on.
"""

from __future__ import annotations

from typing import Sequence

from tir_envs.tools.search.retriever import Hit


def format_hits(hits: Sequence[Hit]) -> str:
    """``Doc 1(Title: …) text\\nDoc 2(Title: …) text\\n…`` (empty string for no hits)."""
    lines = []
    for i, hit in enumerate(hits, 1):
        title, _, text = hit.contents.partition("\n")
        lines.append(f"Doc {i}(Title: {title}) {text}\n")
    return "".join(lines)


def fit_tokens(text: str, codec, budget: int) -> tuple[str, int]:
    """The longest head of ``text`` that encodes to at most ``budget`` tokens.

    Returns ``(head, dropped_tokens)``.  Decoding a token prefix can split a multi-byte
    character; such a broken tail is dropped, and the head re-checked, so the result always
    re-encodes within budget.
    """
    ids = codec.encode(text)
    if len(ids) <= budget:
        return text, 0
    keep = max(budget, 0)
    while keep > 0:
        head = codec.decode(ids[:keep]).rstrip("\ufffd")
        if len(codec.encode(head)) <= budget:
            return head, len(ids) - keep
        keep -= 1
    return "", len(ids)
