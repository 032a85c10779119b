"""XML-like tags: ``<python>code</python>``, ``<search>q</search>``, ``<sql>q</sql>``.

Each tag maps to a tool and the argument its body fills; each tool has a result tag
(``<result>``, ``<information>``, ``<observation>``).  Generation stops at the closing tag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tir_envs.formats.base import ToolCall, ToolCallFormat
from tir_envs.formats.tagged import TaggedPattern


@dataclass(frozen=True)
class TagSpec:
    """How one tool is written: the call tag, its argument name, and the result tag."""

    tag: str
    tool: str
    argument: str
    result_tag: str


DEFAULT_TAGS = (
    TagSpec("python", "python", "code", "result"),
    TagSpec("code", "python", "code", "result"),
    TagSpec("search", "search", "query", "information"),
    TagSpec("sql", "sql", "query", "observation"),
)


class TagsFormat(ToolCallFormat):
    name = "tags"

    def __init__(self, specs: tuple[TagSpec, ...] | list[TagSpec] = DEFAULT_TAGS,
                 tools: list[str] | None = None):
        self.specs = {s.tag: s for s in specs if tools is None or s.tool in tools}
        if not self.specs:
            raise ValueError(f"no tag is defined for tools {tools}; known tags: "
                             f"{[s.tag for s in specs]}")
        names = "|".join(re.escape(t) for t in self.specs)
        self._call = TaggedPattern(rf"<({names})>(.*?)</\1>", self.specs)
        # Tool output written by the policy itself is not a call: ignore text from there on.
        result_tags = sorted({s.result_tag for s in self.specs.values()})
        self._result_open = re.compile("|".join(f"<{re.escape(t)}>" for t in result_tags))

    @property
    def stop_sequences(self) -> list[str]:
        return [f"</{t}>" for t in self.specs]

    def visible(self, text: str) -> str:
        m = self._result_open.search(text)
        return text[:m.start()] if m else text

    def parse(self, text: str) -> list[ToolCall]:
        calls = []
        for m in self._call.finditer(self.visible(text)):
            spec = self.specs[m.group(1)]
            calls.append(ToolCall(spec.tool, {spec.argument: m.group(2).strip("\n")},
                                  m.group(0), m.start(), m.end()))
        return calls

    def prose(self, text: str) -> str:
        return self._call.sub("", text)

    def render_call(self, tool: str, body: str) -> str:
        for spec in self.specs.values():
            if spec.tool == tool:
                return f"<{spec.tag}>{body}</{spec.tag}>"
        raise ValueError(f"no tag calls {tool!r}; tags: {sorted(self.specs)}")

    def result_tag(self, tool: str | None) -> str:
        for spec in self.specs.values():
            if spec.tool == tool:
                return spec.result_tag
        return "result"

    def render_result(self, call: ToolCall, text: str) -> str:
        tag = self.result_tag(call.name)
        return f"\n<{tag}>\n{text.strip(chr(10))}\n</{tag}>\n"

    def render_observation(self, calls, texts, action_text: str) -> str:
        return "".join(self.render_result(c, t) for c, t in zip(calls, texts))
