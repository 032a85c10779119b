"""The SkyRL-SQL / VerlTool VT-SQL interaction protocol: tags, stop strings, observations.

Facts of those recipes a model trained with them depends on (SkyRL ``skyrl_gym`` SQL env and
VerlTool's ``sql`` tool):
  * the policy explores with ``<sql>…</sql>`` and ends with ``<solution>…</solution>``; an
    action holding a complete solution ends the episode (no query in it is run);
  * otherwise its first ``<sql>`` block runs, and the env writes back
    ``\\n\\n<observation>RESULT\\n<reminder>You have N turns left to complete the
    task.</reminder></observation>\\n\\n`` (one line), N being what is left of ``max_turns``
    (default 5);
  * an action with neither tag gets a notice in the same frame and the episode goes on;
  * generation stops at ``</sql>`` or ``</solution>``.
Built on the project's ``tags`` format (``TagSpec`` sql → observation).
"""

from __future__ import annotations

import re
from typing import Sequence

from tir_envs.formats.base import ToolCall
from tir_envs.formats.tags import TagsFormat, TagSpec

#: the user message; written for this project (the recipes' own prompts target SQLite)
SQL_PROMPT_TEMPLATE = (
    "You are an expert data analyst. Write one SQL query that answers the question below, "
    "using the database described here.\n\n"
    "Database engine: DuckDB (read-only)\n\n"
    "Database schema:\n{schema}\n\n"
    "Question:\n{question}\n\n"
    "How to work:\n"
    "- Reason step by step inside <think>...</think> before each action.\n"
    "- To look at the data or check part of your answer, run one query inside <sql>...</sql>. "
    "Its result (at most {max_rows} rows) or its error comes back inside "
    "<observation>...</observation>.\n"
    "- When you are sure, give the final query inside <solution>...</solution>. It is executed "
    "and its result compared with the correct result, so return exactly the columns the "
    "question asks for, in that order.\n"
    "- You have {max_turns} turns in total. Give your solution before they run out.\n"
)

SQL_TAG = TagSpec("sql", "sql", "query", "observation")
INVALID_ACTION = ("your previous action had no complete <sql>…</sql> query and no final "
                  "<solution>…</solution>. Think, then either run one query inside <sql></sql> "
                  "or give your final SQL inside <solution></solution>.")
UNCLOSED_SQL = "the <sql> block was not closed; end the query with </sql>."
_SOLUTION = re.compile(r"<solution>.*?</solution>", re.DOTALL)


def reminder(turns_left: int) -> str:
    return f"<reminder>You have {turns_left} turns left to complete the task.</reminder>"


class SQLFormat(TagsFormat):
    """``<sql>`` calls and ``<solution>`` answers (see the module docstring)."""

    name = "sql-tags"
    result_opener = "<observation>"

    def __init__(self) -> None:
        super().__init__(specs=(SQL_TAG,))

    @property
    def stop_sequences(self) -> list[str]:
        return ["</sql>", "</solution>"]

    def has_solution(self, text: str) -> bool:
        """Whether the action (before any observation it wrote itself) gives a solution."""
        return bool(_SOLUTION.search(self.visible(text)))

    def parse(self, text: str) -> list[ToolCall]:
        """The first ``<sql>`` call; none for a solution; an error call for anything else."""
        if self.has_solution(text):
            return []
        calls = super().parse(text)
        if calls:
            return calls[:1]
        error = UNCLOSED_SQL if "<sql>" in self.visible(text) else INVALID_ACTION
        return [ToolCall("sql", {}, "", 0, 0, error=error)]

    def render_result(self, call: ToolCall, text: str) -> str:
        """One result in the observation frame, without the reminder.  (A botched call's
        text is already the env's ``Error: …`` line.)"""
        return f"\n\n<observation>{text.strip(chr(10))}</observation>\n\n"

    def render_turn(self, texts: Sequence[str], turns_left: int) -> str:
        """The observation frame of one turn, ending with the turns-left reminder."""
        body = "\n".join(t.strip("\n") for t in texts)
        return f"\n\n<observation>{body}\n{reminder(turns_left)}</observation>\n\n"
