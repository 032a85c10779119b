"""Exploration calls and a final-solution tag (SkyRL-SQL): ``<sql>q</sql>`` … ``<solution>``.

An action holding a complete ``<solution>…</solution>`` ends the episode (no query in it runs);
otherwise its first complete call runs; an action with neither is an error call whose message
the protocol shows.  Results come back in one frame per turn.
"""

from __future__ import annotations

import re

from tir_envs.formats.base import ToolCall
from tir_envs.formats.tags import TagsFormat, TagSpec
from tir_envs.formats.tagged import TaggedPattern


class SolutionTagsFormat(TagsFormat):
    """One call tag (``spec``) and a solution tag (see the module docstring)."""

    name = "solution-tags"

    def __init__(self, spec: TagSpec, solution_tag: str = "solution",
                 invalid_error: str = "invalid action", unclosed_error: str = "unclosed call"):
        super().__init__(specs=(spec,))
        self.spec, self.solution_tag = spec, solution_tag
        self.result_opener = f"<{spec.result_tag}>"
        self.invalid_error, self.unclosed_error = invalid_error, unclosed_error
        tag = re.escape(solution_tag)
        self._solution = TaggedPattern(rf"<{tag}>(.*?)</{tag}>", [solution_tag])

    @property
    def stop_sequences(self) -> list[str]:
        return [f"</{self.spec.tag}>", f"</{self.solution_tag}>"]

    def solution(self, text: str) -> str | None:
        """The last complete solution of the action (before any result it wrote itself)."""
        found = self._solution.findall(self.visible(text))
        return found[-1] if found else None

    def parse(self, text: str) -> list[ToolCall]:
        if self.solution(text) is not None:
            return []
        calls = super().parse(text)
        if calls:
            return calls[:1]
        opened = f"<{self.spec.tag}>" in self.visible(text)
        return [ToolCall(self.spec.tool, {}, "", 0, 0,
                         error=self.unclosed_error if opened else self.invalid_error)]
