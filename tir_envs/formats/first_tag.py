"""The first complete tag decides (Search-R1): ``<search>q</search>`` or ``<answer>a</answer>``.

An action is read up to any result block it hallucinated; its *first* complete call or answer
tag decides what it is.  A call runs; an answer ends the episode (which answer is graded is the
protocol's rule: Search-R1's is the last ``<answer>``); an action with neither gets
the protocol's corrective notice as its observation, and the episode goes on.
"""

from __future__ import annotations

import re
from typing import Sequence

from tir_envs.formats.base import ToolCall, ToolCallFormat
from tir_envs.formats.tagged import TaggedPattern


class FirstTagFormat(ToolCallFormat):
    """``<call_tag>arg</call_tag>`` calls of one tool; ``<answer_tag>`` ends the episode."""

    name = "first-tag"

    def __init__(self, call_tag: str = "search", tool: str = "search", argument: str = "query",
                 answer_tag: str = "answer", result_tag: str = "information",
                 invalid_notice: str = "", invalid_error: str = "invalid action"):
        self.call_tag, self.tool, self.argument = call_tag, tool, argument
        self.answer_tag, self.result_tag = answer_tag, result_tag
        self.result_opener = f"<{result_tag}>"
        self.invalid_notice, self.invalid_error = invalid_notice, invalid_error
        tags = f"{re.escape(call_tag)}|{re.escape(answer_tag)}"
        self._action = TaggedPattern(rf"<({tags})>(.*?)</\1>", [call_tag, answer_tag])

    @property
    def stop_sequences(self) -> list[str]:
        return [f"</{self.call_tag}>", f"</{self.answer_tag}>"]

    def first_tag(self, text: str) -> tuple[str | None, str, re.Match | None]:
        """``(tag, body, match)`` of the first complete tag, or ``(None, "", None)``."""
        m = self._action.search(self.visible(text))
        return (m.group(1), m.group(2).strip(), m) if m else (None, "", None)

    def parse(self, text: str) -> list[ToolCall]:
        tag, body, m = self.first_tag(text)
        if tag == self.call_tag:
            return [ToolCall(self.tool, {self.argument: body}, m.group(0), m.start(), m.end())]
        if tag == self.answer_tag:
            return []
        return [ToolCall(None, {}, "", 0, 0, error=self.invalid_error)]

    def render_call(self, tool: str, body: str) -> str:
        if tool != self.tool:
            raise ValueError(f"this format calls only {self.tool!r}, not {tool!r}")
        return f"<{self.call_tag}>{body}</{self.call_tag}>"

    def render_result(self, call: ToolCall, text: str) -> str:
        if call.error:
            return self.invalid_notice
        return f"\n\n<{self.result_tag}>{text.strip()}</{self.result_tag}>\n\n"

    def render_observation(self, calls: Sequence[ToolCall], texts: Sequence[str],
                           action_text: str) -> str:
        return "".join(self.render_result(c, t) for c, t in zip(calls, texts))
