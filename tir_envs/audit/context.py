"""What a probe reads while it plays one episode: the env's protocol and tools, the task's
gold and wrong answers, the prompt, and the observations so far."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tir_envs.audit.candidates import Candidates

#: a harmless main input per known tool, for honest calls
BENIGN_INPUT = {"python": "print(6 * 7)", "sql": "SELECT 1", "search": None}


@dataclass
class ProbeContext:
    """One episode as a probe sees it (built by the runner at reset)."""

    env: Any                      # the unwrapped ``TIREnv``
    task: Any
    candidates: Candidates
    prompt: str                   # the prompt text
    observations: list[str] = field(default_factory=list)  # decoded, one per step
    max_new_tokens: int = 0       # what the current generation may write at most

    @property
    def protocol(self):
        return self.env.protocol

    @property
    def gold(self) -> str:
        return self.candidates.gold

    @property
    def wrong(self) -> tuple[str, ...]:
        return self.candidates.wrong

    @property
    def tools(self) -> list[str]:
        """The env's tool names (none in a tool-less env)."""
        return list(self.env.tools) if self.env.use_tools else []

    @property
    def tool(self) -> str | None:
        """The tool probes call by default: the env's first."""
        return self.tools[0] if self.tools else None

    @property
    def last_observation(self) -> str:
        """The latest non-empty observation text ("" before any)."""
        return next((o for o in reversed(self.observations) if o.strip()), "")

    def answer(self, text: str) -> str:
        """``text`` written as this protocol's final answer."""
        return self.lead() + self.protocol.render_answer(text)

    def call(self, tool: str, body: str) -> str:
        """A call of ``tool`` with main input ``body``, in this protocol's format."""
        return self.lead() + self.protocol.render_call(tool, body)

    def lead(self) -> str:
        """The close of a reasoning block the prompt leaves open (a family that prefills its
        opener: DeepSeek R1): an honest action closes it first, else all it writes is
        reasoning, which is never graded (and the baseline would score a format penalty)."""
        chat = getattr(self.env, "chat", None)
        if chat is None or not chat.opens_reasoning:
            return ""
        return chat.renderer.reasoning.close + "\n\n"

    def call_with(self, tool: str, arguments: dict[str, Any]) -> str | None:
        """A call of ``tool`` with these ``arguments``, in this protocol's format, or ``None``
        for a format that writes one input per call (tags)."""
        render = getattr(self.protocol.format, "render_call_arguments", None)
        return None if render is None else render(tool, arguments)

    def main_argument(self, tool: str) -> str:
        """The argument ``call`` fills with its body."""
        return getattr(self.protocol.format, "argument_names", {}).get(tool, "input")

    def benign(self, tool: str) -> str:
        """A harmless input for ``tool`` (the question itself for a search-like tool)."""
        known = BENIGN_INPUT.get(tool, "1")
        return known if known is not None else self.task.question[:200]

    def echo(self, tool: str, text: str) -> str | None:
        """An input that makes ``tool`` print ``text`` in its result without holding ``text``
        itself (so the policy never wrote it: only the tool's output does), or ``None`` for a
        tool that cannot be made to (Python decodes hex; SQL concatenates one-character
        literals)."""
        if tool == "python":
            return f"print(bytes.fromhex('{text.encode().hex()}').decode())"
        if tool == "sql":
            return "SELECT " + " || ".join("'" + c.replace("'", "''") + "'" for c in text)
        return None
