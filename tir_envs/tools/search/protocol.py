"""The Search-R1 interaction protocol: prompt, action tags, and what the env writes back.

Facts of Search-R1 (Jin et al., 2025) that a model trained with it depends on:
  * a user prompt naming the tags (``SEARCH_R1_TEMPLATE``, in our own words; questions get a
    trailing ``?`` if they lack one);
  * an action is decided by its *first* ``<search>…</search>`` or ``<answer>…</answer>``;
  * search results come back as ``\\n\\n<information>…</information>\\n\\n`` right after the
    action, inside the same assistant turn (no chat-template glue);
  * an action with neither tag gets a corrective notice (``INVALID_ACTION_NOTICE``) and the
    episode goes on.
"""

from __future__ import annotations

import re
from typing import Sequence

from tir_envs.formats.base import ToolCall, ToolCallFormat

# Our own wording of the Search-R1 protocol: the same tags, order and answer format a model
# trained in that setting expects.  Pass ``prompt_template=`` to SearchEnv to use another text.
SEARCH_R1_TEMPLATE = (
    "Answer the question below. Think inside <think> and </think> each time you receive new "
    "information. When you are missing a fact, search for it by writing <search> your query "
    "</search>; the best matching passages will be returned between <information> and "
    "</information>. You may search several times. Once you know enough, give only the final "
    "answer inside <answer> and </answer>, without explanation, e.g. <answer> Paris </answer>. "
    "Question: {question}\n"
)

INVALID_ACTION_NOTICE = (
    "\nThat action was not valid. To search, I must write the query inside <search> and "
    "</search>. To answer, I must write the answer inside <answer> and </answer>. "
    "I will try again.\n"
)

INVALID_ACTION = "invalid action: no <search>…</search> or <answer>…</answer>"


def search_r1_question(question: str) -> str:
    """The question as Search-R1's data preparation writes it: stripped, ending in ``?``."""
    question = question.strip()
    return question if question.endswith("?") else question + "?"


def render_information(text: str) -> str:
    return f"\n\n<information>{text.strip()}</information>\n\n"


class SearchR1Format(ToolCallFormat):
    """``<search>query</search>`` calls; ``<answer>`` ends the episode (see module doc)."""

    name = "search-r1"
    result_opener = "<information>"
    _action = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)

    @property
    def stop_sequences(self) -> list[str]:
        return ["</search>", "</answer>"]

    def first_action(self, text: str) -> tuple[str | None, str, re.Match | None]:
        """``(kind, body, match)`` of the action's first complete tag, in the text the
        policy wrote before any ``<information>`` it hallucinated; kind ``None`` if none."""
        m = self._action.search(self.visible(text))
        return (m.group(1), m.group(2).strip(), m) if m else (None, "", None)

    def parse(self, text: str) -> list[ToolCall]:
        kind, body, m = self.first_action(text)
        if kind == "search":
            return [ToolCall("search", {"query": body}, m.group(0), m.start(), m.end())]
        if kind == "answer":
            return []
        return [ToolCall(None, {}, "", 0, 0, error=INVALID_ACTION)]

    def render_result(self, call: ToolCall, text: str) -> str:
        return INVALID_ACTION_NOTICE if call.error else render_information(text)

    def render_observation(self, calls: Sequence[ToolCall], texts: Sequence[str],
                           action_text: str) -> str:
        return "".join(self.render_result(c, t) for c, t in zip(calls, texts))
