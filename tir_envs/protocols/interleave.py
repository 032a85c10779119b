"""RITE's format reward: does the episode keep the think -> call -> result cycle?

Scored on the policy's actions only (one per turn):
  * -1, broken cycle: the episode did not end with a call to the answer tool, a tool call could
    not be parsed (bad JSON, no name), or ``<think>`` tags are unbalanced in some turn.
  * 0, minor issues: the cycle is complete, but some turn does not open with a ``<think>`` block,
    makes more or fewer than one call, calls before it finished thinking, or has text outside
    ``<think>`` and ``<tool_call>``.
  * +1: every turn is ``<think>…</think>`` followed by exactly one well-formed call, and the last
    call is the answer.
Returns ``(score, issues)``; the issues say what cost the points.
"""

from __future__ import annotations

from typing import Sequence

from tir_envs.formats.base import ToolCallFormat
from tir_envs.formats.tagged import TaggedPattern

_THINK = TaggedPattern(r"<think>.*?</think>", ["think"])
_CALL = TaggedPattern(r"<tool_call>.*?</tool_call>", ["tool_call"])


def _without_calls(text: str, calls: Sequence) -> str:
    """``text`` less its calls as the format parsed them: a family's call syntax (Llama 3's
    JSON turn, Mistral's ``[TOOL_CALLS]``) is no text outside the call."""
    for c in sorted((c for c in calls if c.end > c.start), key=lambda c: c.start, reverse=True):
        text = text[:c.start] + text[c.end:]
    return text


def _turn_issues(i: int, text: str, fmt: ToolCallFormat) -> tuple[list[str], list[str]]:
    major, minor = [], []
    calls = fmt.parse(text)
    if any(c.error for c in calls):
        major.append(f"turn {i}: malformed tool call")
    if text.count("<think>") != text.count("</think>"):
        major.append(f"turn {i}: unbalanced <think> tags")
    if not text.lstrip().startswith("<think>"):
        minor.append(f"turn {i}: does not open with <think>")
    if len(calls) != 1:
        minor.append(f"turn {i}: {len(calls)} tool calls (one expected)")
    think_end = text.find("</think>")
    if calls and think_end >= 0 and calls[0].start < think_end:
        minor.append(f"turn {i}: tool call inside the thinking")
    if _CALL.sub("", _THINK.sub("", _without_calls(text, calls))).strip():
        minor.append(f"turn {i}: text outside <think> and <tool_call>")
    return major, minor


def interleaved_format_score(actions: Sequence[str], fmt: ToolCallFormat,
                             answer_tool: str = "answer",
                             eos_text: str | None = None) -> tuple[float, list[str]]:
    """The format score of an episode's actions (see the module docstring)."""
    major: list[str] = []
    minor: list[str] = []
    cleaned = []
    for text in actions:
        if eos_text and text.rstrip().endswith(eos_text):  # the end-of-turn token is not text
            text = text.rstrip()[: -len(eos_text)]
        cleaned.append(text)
    last_calls = fmt.parse(cleaned[-1]) if cleaned else []
    if not last_calls or last_calls[-1].name != answer_tool or last_calls[-1].error:
        major.append("the episode did not end with a call to the answer tool")
    for i, text in enumerate(cleaned):
        a, b = _turn_issues(i, text, fmt)
        major += a
        minor += b
    if major:
        return -1.0, major + minor
    return (0.0, minor) if minor else (1.0, [])
