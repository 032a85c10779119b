"""``tir/Search-v0``: answer questions by searching a corpus, the Search-R1 setting.

The policy writes ``<search>query</search>`` and reads the top documents in
``<information>…</information>``; it ends with ``<answer>…</answer>``, scored by exact match
(or F1) against the gold aliases.  With no arguments: the bundled Qwen2.5 tokenizer, the 1100
shipped HotpotQA dev-distractor questions, and a BM25 index of their 10,785 context paragraphs
(Lucene when Java 21 is available, else in-process), built once into the cache on first search.
Protocol and budgets: ``tir_envs.protocols.search_r1``.
"""

from __future__ import annotations

from typing import Any, Sequence

from tir_envs.data.qa import load_qa_tasks
from tir_envs.data.task import Task
from tir_envs.env import TIREnv, reject_wiring
from tir_envs.protocols.search_r1 import SEARCH_R1_TEMPLATE, SearchR1Protocol
from tir_envs.rewards.base import RewardResult
from tir_envs.rewards.qa import QAReward
from tir_envs.tools.search.backends import check_source
from tir_envs.tools.search.tool import RetrieverSource, SearchTool
from tir_envs.trajectory import Trajectory


def search_tool(retriever: RetrieverSource | None, search_backend: str, topk: int,
                timeout_s: float) -> SearchTool:
    """The ``search`` tool over ``retriever`` (``None``: the shipped HotpotQA index), checked
    now so a wrong backend, folder or missing extra fails at construction."""
    check_source(retriever, search_backend)
    if retriever is None:
        retriever = _default_retriever(search_backend)
    return SearchTool(retriever, topk=topk, timeout_s=timeout_s)


class SearchEnv(TIREnv):
    """Search-R1 QA environment (see the module docstring).

    ``retriever``: a ``Retriever``, an index folder, a retrieval-server URL, or a factory;
    ``None`` is the cached HotpotQA paragraph index (``search_backend`` picks lucene/bm25).
    ``tasks``: Tasks/dicts, a shipped QA set name (``hotpotqa_distractor``, ``nq``, ...),
    or a QA JSONL/Parquet path.  ``metric``: ``"em"`` (Search-R1) or ``"f1"``; both are logged.
    ``prompt_template``: the user message, with ``{question}``.
    """

    env_id = "tir/Search-v0"
    default_tasks = "hotpotqa_distractor"

    def __init__(
        self,
        tokenizer: Any = None,
        tasks: Any = None,
        retriever: RetrieverSource | None = None,
        search_backend: str = "auto",
        topk: int = 3,
        metric: str = "em",
        reward: QAReward | None = None,
        prompt_template: str = SEARCH_R1_TEMPLATE,
        tool_timeout_s: float = 30.0,
        max_calls_per_turn: int | None = 1,
        **kwargs: Any,
    ):
        reject_wiring(kwargs, "SearchEnv", "Pass retriever=... (and prompt_template=...).")
        self.reward = reward or QAReward(metric)
        self.search_tool = search_tool(retriever, search_backend, topk, tool_timeout_s)
        super().__init__(tokenizer=tokenizer, tasks=tasks,
                         protocol=SearchR1Protocol(prompt_template), tools=[self.search_tool],
                         max_calls_per_turn=max_calls_per_turn, **kwargs)

    def load_tasks(self, source: str) -> Sequence[Any]:
        return load_qa_tasks(source)

    def outcome(self, task: Task, trajectory: Trajectory, actions: list[str]) -> RewardResult:
        return self.reward(task, trajectory, actions)


def _default_retriever(backend: str):
    def open_default():
        from tir_envs.tools.search.hotpotqa import hotpotqa_retriever
        return hotpotqa_retriever(backend)
    return open_default
