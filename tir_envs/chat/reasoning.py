"""Reasoning blocks: kept in the ledger as sampled, never read for calls or answers.

``blank_reasoning`` returns the action text with every reasoning block's content replaced by
spaces (newlines kept), so offsets stay valid and the markers stay visible to format rewards;
a protocol then parses calls and answers from text where nothing written while reasoning can
be found.  A block the policy never closed (cut by the token budget, or by a stop string met
while reasoning) runs to the end of the action.
"""

from __future__ import annotations

from tir_envs.chat.renderer import Reasoning


def _blank(text: str) -> str:
    return "".join(c if c == "\n" else " " for c in text)


def blank_reasoning(text: str, reasoning: Reasoning, starts_inside: bool = False) -> str:
    """``text`` with the content of its reasoning blocks blanked (see the module docstring).
    ``starts_inside``: the prompt opened a block the action continues (a prefilled opener)."""
    out, pos, inside = [], 0, starts_inside
    while pos < len(text):
        if inside:
            end = text.find(reasoning.close, pos)
            stop = len(text) if end < 0 else end
            out.append(_blank(text[pos:stop]))
            if end < 0:
                break
            out.append(reasoning.close)
            pos, inside = end + len(reasoning.close), False
        else:
            start = text.find(reasoning.open, pos)
            if start < 0:
                out.append(text[pos:])
                break
            out.append(text[pos:start + len(reasoning.open)])
            pos, inside = start + len(reasoning.open), True
    return "".join(out)


def ends_inside(text: str, reasoning: Reasoning, starts_inside: bool = False) -> bool:
    """Whether ``text`` leaves a reasoning block open (then the next tokens continue it)."""
    last_open = text.rfind(reasoning.open)
    last_close = text.rfind(reasoning.close)
    if last_open < 0 and last_close < 0:
        return starts_inside
    return last_open > last_close
