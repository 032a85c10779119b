"""The SkyRL-SQL / VerlTool VT-SQL protocol: explore with ``<sql>``, answer with ``<solution>``.

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
The prompt shows the schema (CREATE TABLE statements with sample rows) and names the engine
that runs the queries, so the policy writes that engine's dialect.
"""

from __future__ import annotations

from typing import Callable

from tir_envs.formats.solution_tags import SolutionTagsFormat
from tir_envs.formats.tags import TagSpec
from tir_envs.protocols.base import Budgets, EpisodeState, Protocol
from tir_envs.answers.tags import extract_solution

#: the user message; written for this project
SQL_PROMPT_TEMPLATE = (
    "You are an expert data analyst. Write one SQL query that answers the question below, "
    "using the database described here.\n\n"
    "Database engine: {engine} (read-only)\n\n"
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
#: the "w/o tools" prompt: the same solution format, no exploration
STANDALONE_TEMPLATE = (
    "You are an expert data analyst. Write one SQL query that answers the question below, "
    "using the database described here.\n\n"
    "Database engine: {engine} (read-only)\n\n"
    "Database schema:\n{schema}\n\n"
    "Question:\n{question}\n\n"
    "Reason step by step inside <think>...</think>, then give the final query inside "
    "<solution>...</solution>. Return exactly the columns the question asks for, in that order.\n"
)
SQL_TAG = TagSpec("sql", "sql", "query", "observation")
INVALID_ACTION = ("your previous action had no complete <sql>…</sql> query and no final "
                  "<solution>…</solution>. Think, then either run one query inside <sql></sql> "
                  "or give your final SQL inside <solution></solution>.")
UNCLOSED_SQL = "the <sql> block was not closed; end the query with </sql>."

#: ``(engine name, schema text)`` of a task's database, for the prompt
Describe = Callable[["object"], "tuple[str, str]"]


def reminder(turns_left: int) -> str:
    return f"<reminder>You have {turns_left} turns left to complete the task.</reminder>"


class SkyRLSQLProtocol(Protocol):
    """The SkyRL-SQL protocol (see the module docstring).

    ``describe(task) -> (engine, schema)`` renders the task's database for the prompt;
    ``prompt_template`` takes ``{engine}``, ``{schema}``, ``{question}``, ``{max_turns}`` and
    ``{max_rows}``.
    """

    name = "skyrl-sql"
    chat = True
    budgets = Budgets(max_turns=5, max_obs_tokens=2048, max_total_tokens=16384)
    standalone_stops = ("</solution>",)

    def __init__(self, describe: Describe, max_rows: int = 50,
                 prompt_template: str = SQL_PROMPT_TEMPLATE, max_turns: int | None = None):
        missing = [k for k in ("{schema}", "{question}") if k not in prompt_template]
        if missing:
            raise ValueError(f"prompt_template must contain {' and '.join(missing)}")
        super().__init__(SolutionTagsFormat(SQL_TAG, "solution", INVALID_ACTION, UNCLOSED_SQL))
        self.describe, self.max_rows = describe, max_rows
        self.prompt_template = prompt_template
        self.max_turns = max_turns or self.budgets.max_turns

    def prompt(self, task, use_tools: bool = True):
        engine, schema = self.describe(task)
        template = self.prompt_template if use_tools else STANDALONE_TEMPLATE
        text = template.format(engine=engine, schema=schema, question=task.question.strip(),
                               max_turns=self.max_turns, max_rows=self.max_rows)
        return [{"role": "user", "content": text}] if self.chat else text

    def is_final(self, text, calls, state: EpisodeState) -> bool:
        """The action gave a ``<solution>``."""
        return self.format.solution(text) is not None

    def observation(self, calls, texts, text, state: EpisodeState) -> str:
        """One frame per turn, ending with the turns-left reminder."""
        body = "\n".join(t.strip("\n") for t in texts)
        return f"\n\n<observation>{body}\n{reminder(state.turns_left)}</observation>\n\n"

    def render_answer(self, text: str) -> str:
        return f"<solution>{text}</solution>"

    def answer(self, state: EpisodeState) -> str | None:
        """The reward's reading of the final action: exactly one well-formed solution."""
        if not state.actions:
            return None
        return extract_solution(self.format.visible(state.actions[-1]))
