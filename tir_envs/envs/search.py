"""``tir/Search-v0``: answer questions by searching a corpus, the Search-R1 setting.

The policy writes ``<search>query</search>`` and reads the top documents in
``<information>…</information>``; it ends with ``<answer>…</answer>``, scored by exact match
(or F1) against the gold aliases.  With no arguments: the bundled Qwen2.5 tokenizer, the 1100
shipped HotpotQA dev-distractor questions, and a BM25 index of their 10,785 context paragraphs
(Lucene when Java 21 is available, else in-process), built once into the cache on first search.

Budgets follow Search-R1: two search rounds then an answering turn (``max_turns=3`` actions,
Search-R1's ``max_turns=2``), 3 documents per search, observations capped at 500 tokens (the
documents are cut, the tags kept).
"""

from __future__ import annotations

from typing import Any, Sequence

from tir_envs.data.task import Task
from tir_envs.env import TIREnv
from tir_envs.formats.base import ToolCall
from tir_envs.rewards.base import RewardResult
from tir_envs.rewards.qa import QAReward
from tir_envs.tools.search.formatting import fit_tokens
from tir_envs.tools.search.protocol import (SEARCH_R1_TEMPLATE, SearchR1Format,
                                            search_r1_question)
from tir_envs.tools.search.tool import RetrieverSource, SearchTool
from tir_envs.trajectory import Trajectory

#: tokens kept free under ``max_obs_tokens`` for tokenizer merges at the document/tag seam
_SEAM = 2


class SearchEnv(TIREnv):
    """Search-R1 QA environment (see the module docstring).

    ``retriever``: a ``Retriever``, an index folder, a retrieval-server URL, or a factory;
    ``None`` is the cached HotpotQA paragraph index (``search_backend`` picks lucene/bm25).
    ``reward``: ``"em"`` (Search-R1) or ``"f1"``; both are logged as components.
    ``prompt_template``: the user message, with ``{question}``.
    """

    env_id = "tir/Search-v0"

    def __init__(
        self,
        tokenizer: Any = None,
        tasks: Sequence[Any] | None = None,
        retriever: RetrieverSource | None = None,
        search_backend: str = "auto",
        topk: int = 3,
        reward: str = "em",
        prompt_template: str = SEARCH_R1_TEMPLATE,
        max_turns: int = 3,
        max_obs_tokens: int = 500,
        max_total_tokens: int = 4096,
        max_calls_per_turn: int | None = 1,
        search_timeout_s: float = 30.0,
        **kwargs: Any,
    ):
        if "tool_format" in kwargs or "tools" in kwargs:
            raise ValueError("SearchEnv speaks the Search-R1 tag protocol with its own search "
                             "tool; pass retriever=... instead of tool_format/tools")
        if "{question}" not in prompt_template:
            raise ValueError("prompt_template must contain '{question}'")
        if tasks is None:
            from tir_envs.data.qa import load_qa
            tasks = load_qa("hotpotqa_distractor")
        if retriever is None:
            retriever = _default_retriever(search_backend)
        self.search_tool = SearchTool(retriever, topk=topk, timeout_s=search_timeout_s)
        self.reward_fn = QAReward(reward)
        self.prompt_template = prompt_template
        super().__init__(tokenizer=tokenizer, tasks=tasks, tool_format=SearchR1Format(),
                         tools=[self.search_tool], max_turns=max_turns,
                         max_obs_tokens=max_obs_tokens, max_total_tokens=max_total_tokens,
                         max_calls_per_turn=max_calls_per_turn, **kwargs)

    def user_message(self, task: Task) -> str:
        # replace, not str.format: a template may hold other braces (JSON examples)
        return self.prompt_template.replace("{question}", search_r1_question(task.question))

    def is_final(self, action_text: str, calls: list[ToolCall]) -> bool:
        """The action answered: its first tag is ``<answer>``."""
        return self.format.first_action(action_text)[0] == "answer"

    def observation_text(self, calls: list[ToolCall], texts: list[str], action_text: str) -> str:
        """Search-R1 ``<information>`` blocks, documents cut so the whole fits the budget."""
        empty = self.format.render_observation(calls, [""] * len(calls), action_text)
        frame = self.wrap_in_chat(empty, action_text) if self._glue else empty
        room = max(0, self.max_obs_tokens - len(self.codec.encode(frame)) - _SEAM)
        share = room // max(1, len(calls))
        fitted = []
        for call, text in zip(calls, texts):
            head, dropped = (text, 0) if call.error else fit_tokens(text.strip(), self.codec, share)
            if dropped:
                self.trajectory.turns[-1].notes.append(
                    f"search results cut to {share} tokens: {dropped} tokens dropped")
            fitted.append(head)
        body = self.format.render_observation(calls, fitted, action_text)
        return self.wrap_in_chat(body, action_text) if self._glue else body

    def outcome(self, task: Task, trajectory: Trajectory, actions: list[str]) -> RewardResult:
        return self.reward_fn(task, trajectory, actions)


def _default_retriever(backend: str):
    def open_default():
        from tir_envs.tools.search.hotpotqa import hotpotqa_retriever
        return hotpotqa_retriever(backend)
    return open_default
