"""Markdown code fences: ```` ```python ... ``` ```` calls, ```` ```output ... ``` ```` results.

The ToRL / ZeroTIR convention.  Generation usually stops at ```` ```output ```` (kept in the
action), so the env continues with the output text and the closing fence.
"""

from __future__ import annotations

import re

from tir_envs.formats.base import ToolCall, ToolCallFormat


class MarkdownFormat(ToolCallFormat):
    name = "markdown"

    def __init__(self, tool: str = "python", language: str = "python",
                 output_language: str = "output", stop: list[str] | None = None):
        self.tool = tool
        self.language = language
        self.result_opener = f"```{output_language}"
        self._stop = stop if stop is not None else [self.result_opener]
        self._block = re.compile(
            r"```" + re.escape(language) + r"[ \t]*\n(.*?)\n?[ \t]*```", re.DOTALL)
        self._open_block = re.compile(r"```" + re.escape(language) + r"[ \t]*\n.*\Z", re.DOTALL)

    @property
    def stop_sequences(self) -> list[str]:
        return list(self._stop)

    def parse(self, text: str) -> list[ToolCall]:
        visible = self.visible(text)
        return [ToolCall(self.tool, {"code": m.group(1)}, m.group(0), m.start(), m.end())
                for m in self._block.finditer(visible)]

    def render_result(self, call: ToolCall, text: str) -> str:
        return f"{self.result_opener}\n{text.rstrip(chr(10))}\n```\n"

    def prose(self, text: str) -> str:
        """Without its code blocks, complete or left open at the end."""
        return self._open_block.sub("", self._block.sub("", text))

    def render_call(self, tool: str, body: str) -> str:
        if tool != self.tool:
            raise ValueError(f"this markdown format calls only {self.tool!r}, not {tool!r}")
        return f"```{self.language}\n{body}\n```"


_OPEN_BLOCK = re.compile(r"```python[ \t]*\n")


class LastBlockFormat(MarkdownFormat):
    """Markdown blocks of which only the last complete one before the result opener runs
    (ToRL).  An action whose last ```` ```python ```` block is unterminated runs nothing."""

    def parse(self, text: str) -> list[ToolCall]:
        visible = self.visible(text)
        calls = super().parse(visible)
        if not calls or _OPEN_BLOCK.search(visible, calls[-1].end):
            return []
        return [calls[-1]]
