"""Tool-call formats: turn the policy's action text into calls, and results into text.

A format never raises on model output.  Whatever the text (unterminated blocks, broken JSON,
hallucinated tool output after the stop string), ``parse`` returns the calls it can find and
marks the ones it cannot understand with ``error`` so the env can show the model what went wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence


@dataclass
class ToolCall:
    """One call found in an action: tool name, arguments, and where it sits in the text."""

    name: str | None
    arguments: dict[str, Any] = field(default_factory=dict)
    raw: str = ""
    start: int = 0
    end: int = 0
    error: str | None = None  # why the call could not be understood; shown to the model

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments, "raw": self.raw,
                "span": [self.start, self.end], "error": self.error}


class ToolCallFormat:
    """Parser and renderer for one way of writing tool calls in text."""

    name: str = "base"
    #: the tool-result opener; text the policy writes after it is not a call (it hallucinated)
    result_opener: str = ""

    @property
    def stop_sequences(self) -> list[str]:
        raise NotImplementedError

    def parse(self, text: str) -> list[ToolCall]:
        raise NotImplementedError

    def render_result(self, call: ToolCall, text: str) -> str:
        """The observation text for one call's result."""
        raise NotImplementedError

    def render_call(self, tool: str, body: str) -> str:
        """The text a policy writes to call ``tool`` with ``body`` as its main input (the code,
        the query): the inverse of ``parse``, for scripted policies (``tir-envs audit``)."""
        raise NotImplementedError(f"the {self.name!r} format does not say how a call is "
                                  "written: define render_call(tool, body)")

    def render_observation(self, calls: Sequence[ToolCall], texts: Sequence[str],
                           action_text: str) -> str:
        """Join the results of one turn.  If the action already ends with the result opener
        (the generator stopped on it and kept it), the opener is not repeated."""
        out = "".join(self.render_result(c, t) for c, t in zip(calls, texts))
        return trim_repeated_opener(out, action_text, self.result_opener)

    def prose(self, text: str) -> str:
        """``text`` without its calls: what the policy wrote to be read, not run.  An answer
        is read from here (a box inside code is the tool's input, not an answer)."""
        return text

    def visible(self, text: str) -> str:
        """The part of an action that can hold calls: text before any result opener."""
        if self.result_opener:
            cut = text.find(self.result_opener)
            if cut >= 0:
                return text[:cut]
        return text


def trim_repeated_opener(observation: str, action_text: str, opener: str) -> str:
    """Drop a leading ``opener`` (after optional whitespace) that the action already wrote."""
    if not opener:
        return observation
    tail = action_text.rstrip()
    if tail.endswith(opener):
        stripped = observation.lstrip()
        if stripped.startswith(opener):
            return stripped[len(opener):]
    return observation
