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
from tir_envs.env import TIREnv, reject_wiring
from tir_envs.envs.tooling import pop_tool_config
from tir_envs.protocols.search_r1 import SEARCH_R1_TEMPLATE, SearchR1Protocol
from tir_envs.rewards.qa import QAReward


class SearchEnv(TIREnv):
    """Search-R1 QA environment (see the module docstring).

    The search tool: ``index`` (a folder or server URL, e.g. wiki-18's) or ``retriever``,
    ``search_backend``, ``topk``, ``tool_timeout_s`` (``tir_envs.envs.tooling``; default: the
    cached HotpotQA paragraph index, top 3, 30 s).
    ``tasks``: Tasks/dicts, a shipped QA set name (``hotpotqa_distractor``, ``nq``, ...),
    or a QA JSONL/Parquet path.  ``metric``: ``"em"`` (Search-R1) or ``"f1"``; both are logged.
    ``prompt_template``: the user message, with ``{question}``.
    """

    env_id = "tir/Search-v0"
    default_tasks = "hotpotqa_distractor"
    configured_tools = ("search",)
    scoring = "qa"

    def __init__(
        self,
        tokenizer: Any = None,
        tasks: Any = None,
        metric: str = "em",
        reward: QAReward | None = None,
        prompt_template: str = SEARCH_R1_TEMPLATE,
        max_calls_per_turn: int | None = 1,
        **kwargs: Any,
    ):
        reject_wiring(kwargs, "SearchEnv", "Pass retriever=... (and prompt_template=...).")
        self.search_tool = pop_tool_config(kwargs, "search")["search"].build()
        super().__init__(tokenizer=tokenizer, tasks=tasks,
                         protocol=SearchR1Protocol(prompt_template), tools=[self.search_tool],
                         reward=reward or QAReward(metric),
                         max_calls_per_turn=max_calls_per_turn, **kwargs)

    def load_tasks(self, source: str) -> Sequence[Any]:
        return load_qa_tasks(source)
