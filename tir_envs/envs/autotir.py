"""``tir/AutoTIR-v0``: one model, search and Python, deciding whether and which tool to use.

Wiring of the AutoTIR protocol (``tir_envs.protocols.autotir``), the two real tools of the other
envs (the BM25 search of ``tir/Search-v0``, by default over its shipped HotpotQA paragraph
index, and the Python sandbox of ``tir/MathCode-v0``) and AutoTIR's reward
(``tir_envs.rewards.autotir``).  Tasks carry their domain and ground-truth tool
(``tir_envs.data.autotir``): ``tasks="autotir-train"`` (default) is the training mix; an
evaluation set by name (``hotpotqa``, ``math500``, ``ifeval``, ``logiqa``, ...) or a JSONL path
of tasks with ``domain``/``tool`` fields works too.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from tir_envs.data.autotir import DOMAIN_TOOL, load_autotir_tasks
from tir_envs.data.task import Task, resolve_tasks
from tir_envs.env import TIREnv, reject_wiring
from tir_envs.envs.mathcode import python_tool
from tir_envs.envs.search import search_tool
from tir_envs.protocols.autotir import AutoTIRProtocol
from tir_envs.rewards.autotir import AutoTIRReward
from tir_envs.rewards.base import RewardResult
from tir_envs.rewards.math.pool import GraderPool
from tir_envs.tools.search.tool import RetrieverSource
from tir_envs.trajectory import Trajectory

DEFAULT_TIMEOUTS = {"search": 30.0, "python": 10.0}


class AutoTIREnv(TIREnv):
    """AutoTIR environment (see the module docstring).

    Tools: ``retriever``/``search_backend``/``topk`` as in ``tir/Search-v0``; ``backend``/
    ``stateful`` as in ``tir/MathCode-v0``; ``tool_timeout_s``: one float for both or a dict by
    tool name.  Reward: ``reward`` (an ``AutoTIRReward``), or one built from ``w_act``,
    ``w_out``, ``wrong_tool`` (the paper's penalty, -1), ``no_tool`` (knowledge or math task
    answered without a tool: 0) and ``grader``.  ``use_tools=False``: the standalone prompt.
    """

    env_id = "tir/AutoTIR-v0"
    default_tasks = "autotir-train"

    def __init__(
        self,
        tokenizer: Any = None,
        tasks: Any = None,
        retriever: RetrieverSource | None = None,
        search_backend: str = "auto",
        topk: int = 3,
        backend: str = "local",
        stateful: bool = True,
        tool_timeout_s: float | Mapping[str, float] = DEFAULT_TIMEOUTS,
        reward: AutoTIRReward | None = None,
        w_act: float = 0.1,
        w_out: float = 0.9,
        wrong_tool: float = -1.0,
        no_tool: float = 0.0,
        grader: GraderPool | None = None,
        **kwargs: Any,
    ):
        reject_wiring(kwargs, "AutoTIREnv", "Pass retriever=/search_backend= and backend=.")
        timeouts = _timeouts(tool_timeout_s)
        self.reward = reward or AutoTIRReward(w_act, w_out, wrong_tool, no_tool, grader)
        tools = [search_tool(retriever, search_backend, topk, timeouts["search"]),
                 python_tool(backend, timeouts["python"], stateful, "full")]
        super().__init__(tokenizer=tokenizer, tasks=tasks, protocol=AutoTIRProtocol(),
                         tools=tools, **kwargs)
        _check_domains(self.tasks)

    def load_tasks(self, source: str) -> Sequence[Any]:
        if source.endswith((".jsonl", ".jsonl.gz", ".parquet")):
            return super().load_tasks(source)
        return load_autotir_tasks(source)

    def outcome(self, task: Task, trajectory: Trajectory, actions: list[str]) -> RewardResult:
        return self.reward(task, trajectory, actions)

    def on_reset(self, task: Task) -> None:
        _check_domains([task])  # a task given at reset, too: every caller runs this

    def on_close(self) -> None:
        for tool in self.tools.values():
            tool.close()


def _timeouts(value: float | Mapping[str, float]) -> dict[str, float]:
    if isinstance(value, Mapping):
        unknown = set(value) - set(DEFAULT_TIMEOUTS)
        if unknown:
            raise ValueError(f"tool_timeout_s names unknown tools {sorted(unknown)}; the tools "
                             f"are {sorted(DEFAULT_TIMEOUTS)}")
        return {**DEFAULT_TIMEOUTS, **value}
    return {name: float(value) for name in DEFAULT_TIMEOUTS}


def _check_domains(tasks: Sequence[Task]) -> None:
    """Every task must say its domain and ground-truth tool: the reward reads both."""
    for task in tasks:
        domain = task.meta.get("domain")
        if domain not in DOMAIN_TOOL:
            raise ValueError(f"AutoTIR task {task.id!r} has meta['domain']={domain!r}; use one "
                             f"of {sorted(DOMAIN_TOOL)} (and meta['tool'], its ground-truth "
                             "tool: search, python or null)")
        task.meta.setdefault("tool", DOMAIN_TOOL[domain])
