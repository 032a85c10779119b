"""Search-R1 (Jin et al., 2025): search with ``<search>``, read ``<information>``, answer.

Facts of the protocol a model trained with it depends on:
  * a user prompt naming the tags (``SEARCH_R1_TEMPLATE``, in our own words; questions get a
    trailing ``?`` if they lack one);
  * an action is decided by its *first* ``<search>…</search>`` or ``<answer>…</answer>``;
  * the answer graded is the *last* complete ``<answer>…</answer>`` of the final action (the
    paper's scorer keeps the last match), so ``<answer>Paris</answer> … <answer>Lyon</answer>``
    answers Lyon: one reading, recorded in the ledger and handed to the reward;
  * search results come back as ``\\n\\n<information>…</information>\\n\\n`` right after the
    action, inside the same assistant turn (no chat-template glue); the documents are cut so
    the whole observation fits ``max_obs_tokens`` (the tags are kept);
  * an action with neither tag gets a corrective notice (``INVALID_ACTION_NOTICE``) and the
    episode goes on.
Budgets: two search rounds then an answering turn (``max_turns=3`` actions, Search-R1's
``max_turns=2``), observations capped at 500 tokens.
"""

from __future__ import annotations

from tir_envs.formats.base import ToolCall
from tir_envs.formats.first_tag import FirstTagFormat
from tir_envs.protocols.base import Budgets, EpisodeState, Protocol
from tir_envs.answers.tags import extract_answer
from tir_envs.tools.search.formatting import fit_tokens

# Our own wording of the Search-R1 protocol: the same tags, order and answer format a model
# trained in that setting expects.  Pass ``prompt_template=`` to use another text.
SEARCH_R1_TEMPLATE = (
    "Answer the question below. Think inside <think> and </think> each time you receive new "
    "information. When you are missing a fact, search for it by writing <search> your query "
    "</search>; the best matching passages will be returned between <information> and "
    "</information>. You may search several times. Once you know enough, give only the final "
    "answer inside <answer> and </answer>, without explanation, e.g. <answer> Paris </answer>. "
    "Question: {question}\n"
)
#: the "w/o tools" prompt: the same answer format, no search
STANDALONE_TEMPLATE = (
    "Answer the question below. Think inside <think> and </think>, then give only the final "
    "answer inside <answer> and </answer>, without explanation, e.g. <answer> Paris </answer>. "
    "Question: {question}\n"
)
INVALID_ACTION_NOTICE = (
    "\nThat action was not valid. To search, I must write the query inside <search> and "
    "</search>. To answer, I must write the answer inside <answer> and </answer>. "
    "I will try again.\n"
)
INVALID_ACTION = "invalid action: no <search>…</search> or <answer>…</answer>"
#: tokens kept free under ``max_obs_tokens`` for tokenizer merges at the document/tag seam
_SEAM = 2


def search_r1_question(question: str) -> str:
    """The question as Search-R1's data preparation writes it: stripped, ending in ``?``."""
    question = question.strip()
    return question if question.endswith("?") else question + "?"


class SearchR1Protocol(Protocol):
    """The Search-R1 protocol (see the module docstring); ``prompt_template`` holds
    ``{question}``."""

    name = "search-r1"
    chat = True
    budgets = Budgets(max_turns=3, max_obs_tokens=500, max_total_tokens=4096)
    standalone_stops = ("</answer>",)

    def __init__(self, prompt_template: str = SEARCH_R1_TEMPLATE) -> None:
        if "{question}" not in prompt_template:
            raise ValueError("prompt_template must contain '{question}'")
        super().__init__(FirstTagFormat("search", "search", "query", "answer", "information",
                                        INVALID_ACTION_NOTICE, INVALID_ACTION))
        self.prompt_template = prompt_template

    def prompt(self, task, use_tools: bool = True):
        template = self.prompt_template if use_tools else STANDALONE_TEMPLATE
        # replace, not str.format: a template may hold other braces (JSON examples)
        text = template.replace("{question}", search_r1_question(task.question))
        return [{"role": "user", "content": text}] if self.chat else text

    def is_final(self, text: str, calls: list[ToolCall], state: EpisodeState) -> bool:
        """The action answered: its first tag is ``<answer>``."""
        return self.format.first_tag(text)[0] == "answer"

    def observation(self, calls, texts, text, state: EpisodeState) -> str:
        """``<information>`` blocks, documents cut so the framed whole fits the budget."""
        empty = self.format.render_observation(calls, [""] * len(calls), text)
        frame = state.frame(empty, text)
        room = max(0, state.obs_token_budget - len(state.codec.encode(frame)) - _SEAM)
        share = room // max(1, len(calls))
        fitted = []
        for call, result in zip(calls, texts):
            head, dropped = (result, 0) if call.error else \
                fit_tokens(result.strip(), state.codec, share)
            if dropped:
                state.notes.append(f"search results cut to {share} tokens: {dropped} tokens "
                                   "dropped")
            fitted.append(head)
        return self.format.render_observation(calls, fitted, text)

    def render_answer(self, text: str) -> str:
        return f"<answer> {text} </answer>"

    def answer(self, state: EpisodeState) -> str | None:
        """The *last* complete ``<answer>`` of the final action (``extract_answer``), as
        Search-R1 grades it; the first tag only decides whether the action answers."""
        return extract_answer(state.actions[-1]) if state.actions else None
