"""The policy's final response: what outcome rewards without a gold string to match read.

The last action of the episode, with the ``<think>…</think>`` reasoning removed, so that an
option letter or a forbidden word the policy only considered while thinking does not count.
When the chat template opened ``<think>`` in the prompt, the action holds only ``</think>``:
everything up to it is reasoning too.
"""

from __future__ import annotations

from typing import Sequence

from tir_envs.formats.tagged import TaggedPattern

_THINK = TaggedPattern(r"<think>.*?</think>", ["think"])


def strip_reasoning(text: str) -> str:
    """``text`` without its ``<think>`` blocks (and anything before a lone ``</think>``)."""
    return _THINK.sub("", text).rsplit("</think>", 1)[-1].strip()


def final_response(actions: Sequence[str]) -> str:
    """The last action without its reasoning; ``""`` when there was no action."""
    return strip_reasoning(actions[-1]) if actions else ""
