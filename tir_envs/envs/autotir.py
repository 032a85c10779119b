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

from typing import Any, Sequence

from tir_envs.data.autotir import DOMAIN_TOOL, load_autotir_tasks
from tir_envs.env import TIREnv, reject_wiring
from tir_envs.envs.tooling import pop_tool_config
from tir_envs.protocols.autotir import AutoTIRProtocol
from tir_envs.rewards.autotir import AutoTIRReward
from tir_envs.rewards.math.pool import GraderPool
from tir_envs.task import Task


class AutoTIREnv(TIREnv):
    """AutoTIR environment (see the module docstring).

    Tools (``tir_envs.envs.tooling``): ``index`` or ``retriever``, ``search_backend``,
    ``topk`` for search, ``backend``/``stateful`` for Python, ``tool_timeout_s``: one number for both or a dict by
    tool name.  Reward: ``reward`` (an ``AutoTIRReward``), or one built from ``w_act``,
    ``w_out``, ``wrong_tool`` (the paper's penalty, -1), ``no_tool`` (knowledge or math task
    answered without a tool: 0), ``grader`` and ``output_reward`` (``"paper"``: eq. 5's
    ``max(0.1, f)`` for a boxed answer, else 0; ``"plain"``: the score as it is).  ``use_tools=False``: the standalone prompt.
    """

    env_id = "tir/AutoTIR-v0"
    default_tasks = "autotir-train"
    configured_tools = ("search", "python")
    scoring = "math"

    def __init__(
        self,
        tokenizer: Any = None,
        tasks: Any = None,
        reward: AutoTIRReward | None = None,
        w_act: float = 0.1,
        w_out: float = 0.9,
        wrong_tool: float = -1.0,
        no_tool: float = 0.0,
        grader: GraderPool | None = None,
        output_reward: str = "paper",
        **kwargs: Any,
    ):
        reject_wiring(kwargs, "AutoTIREnv", "Pass retriever=/search_backend= and backend=.")
        config = pop_tool_config(kwargs, "search", "python")
        tools = [config["search"].build(), config["python"].build("full")]
        super().__init__(tokenizer=tokenizer, tasks=tasks, protocol=AutoTIRProtocol(),
                         tools=tools,
                         reward=reward or AutoTIRReward(w_act, w_out, wrong_tool, no_tool,
                                                        grader, output_reward=output_reward),
                         **kwargs)
        _check_domains(self.tasks)

    def load_tasks(self, source: str) -> Sequence[Any]:
        if source.endswith((".jsonl", ".jsonl.gz", ".parquet")):
            return super().load_tasks(source)
        return load_autotir_tasks(source)

    def on_reset(self, task: Task) -> None:
        _check_domains([task])  # a task given at reset, too: every caller runs this

    def on_close(self) -> None:
        for tool in self.tools.values():
            tool.close()


def _check_domains(tasks: Sequence[Task]) -> None:
    """Every task must say its domain and ground-truth tool: the reward reads both."""
    for task in tasks:
        domain = task.meta.get("domain")
        if domain not in DOMAIN_TOOL:
            raise ValueError(f"AutoTIR task {task.id!r} has meta['domain']={domain!r}; use one "
                             f"of {sorted(DOMAIN_TOOL)} (and meta['tool'], its ground-truth "
                             "tool: search, python or null)")
        task.meta.setdefault("tool", DOMAIN_TOOL[domain])
