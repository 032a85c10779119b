"""``tir/MathCode-v0``: reason, run Python, read the output, answer in ``\\boxed{}``.

The ToRL / ZeroTIR / RITE setting.  ``recipe`` picks the paper whose protocol the env follows
(prompt, tool-call format, stop strings, output rendering, budgets, reward; see
``tir_envs.envs.recipes``).  With no arguments the env runs ToRL on the shipped MATH-500 tasks
with the bundled Qwen2.5 tokenizer and the local Python sandbox, one stateful interpreter per
episode (``stateful=False`` reproduces the papers' one-shot executors).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from tir_envs.data.math import load_math_tasks
from tir_envs.data.task import Task
from tir_envs.env import TIREnv
from tir_envs.envs.recipes import Recipe, get_recipe
from tir_envs.formats.base import ToolCall
from tir_envs.rewards.base import RewardResult
from tir_envs.rewards.math.pool import GraderPool, default_pool
from tir_envs.rewards.math.reward import MathReward, gold_text
from tir_envs.tools.base import Tool
from tir_envs.trajectory import Trajectory


def python_tool(backend: str, timeout_s: float, stateful: bool, error_style: str) -> Tool:
    """The project's Python sandbox, configured for a recipe."""
    try:
        from tir_envs.tools.python import PythonTool
    except ImportError as exc:  # pragma: no cover - the sandbox ships with the package
        raise ImportError("MathCodeEnv needs the Python sandbox (tir_envs.tools.python); "
                          "pass tool=... to use another Tool named 'python'") from exc
    return PythonTool(backend=backend, timeout_s=timeout_s, stateful=stateful,
                      error_style=error_style)


def _tasks(tasks: Sequence[Any] | str | Path | None) -> Sequence[Any]:
    if tasks is None:
        return load_math_tasks("math500")
    if isinstance(tasks, (str, Path)):
        return load_math_tasks(tasks)
    return tasks


def _positive(name: str, value: int | None) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"{name} must be a positive int (or None for the recipe's default), "
                         f"got {value!r}")


class MathCodeEnv(TIREnv):
    """Math with a Python interpreter, following one paper's protocol.

    ``recipe``: ``"torl"`` (default), ``"zerotir"`` or ``"rite"``.
    ``tasks``: Tasks/dicts, a shipped dataset name (``math500``, ``aime2024``, ``aime2025``,
    ``gsm8k``), or a JSONL/Parquet path; default MATH-500.
    ``tool``: a ``Tool`` named ``python`` to use instead of the local sandbox built from
    ``backend``, ``timeout_s`` and ``stateful``.
    ``max_calls``: python calls per episode (ToRL's C = 1, ZeroTIR's N_max = 20, RITE: no cap
    beyond ``max_turns``).  Other budgets default to the recipe's values.
    Reward: ``correct_reward``/``wrong_reward`` (recipe defaults: ToRL +1/-1, others 1/0),
    ``exec_error_penalty`` (ToRL's 0.5, off by default), ``tool_penalties`` (VerlTool's -0.25
    terms, see ``MathReward``), ``format_reward`` (RITE's, on by default), ``grader`` (a
    ``GraderPool``; default: the process-wide one).
    """

    env_id = "tir/MathCode-v0"

    def __init__(self, recipe: str | Recipe = "torl", tasks: Sequence[Any] | str | Path | None = None,
                 tokenizer: Any = None, tool: Tool | None = None, backend: str = "local",
                 stateful: bool = True, timeout_s: float = 10.0, max_calls: int | None = None,
                 max_turns: int | None = None, max_obs_tokens: int | None = None,
                 max_total_tokens: int | None = None, correct_reward: float | None = None,
                 wrong_reward: float | None = None, exec_error_penalty: float = 0.0,
                 tool_penalties: Mapping[str, float] | None = None, format_reward: bool = True,
                 grader: GraderPool | None = None, render_mode: str | None = None):
        self.recipe = get_recipe(recipe)
        d = self.recipe.defaults
        for name, value in (("max_calls", max_calls), ("max_turns", max_turns),
                            ("max_obs_tokens", max_obs_tokens),
                            ("max_total_tokens", max_total_tokens)):
            _positive(name, value)
        if tool is not None and (not isinstance(tool, Tool) or tool.name != "python"):
            raise TypeError(f"tool must be a Tool named 'python', got {tool!r}")
        calls = max_calls if max_calls is not None else d.max_calls
        self.stateful = stateful
        self._owns_tool = tool is None
        tool = tool or python_tool(backend, timeout_s, stateful, d.error_style)
        self.actions: list[str] = []  # the recipe's format may read it before reset
        super().__init__(
            tokenizer=tokenizer, tasks=_tasks(tasks), tool_format="markdown", tools=[tool],
            max_turns=max_turns or self.recipe.max_turns_for(calls),
            max_tool_calls=None if calls is None else {"python": calls},
            max_obs_tokens=max_obs_tokens or d.max_obs_tokens,
            max_total_tokens=max_total_tokens or d.max_total_tokens,
            chat=self.recipe.chat, observation_role=self.recipe.observation_role,
            render_mode=render_mode)
        self.format = self.recipe.tool_format(self)
        self.grader = grader
        self.format_reward = format_reward
        self.reward_fn = MathReward(
            correct_reward=d.correct_reward if correct_reward is None else correct_reward,
            wrong_reward=d.wrong_reward if wrong_reward is None else wrong_reward,
            exec_error_penalty=exec_error_penalty, tool_penalties=dict(tool_penalties or {}),
            grader=grader)

    # -- recipe hooks -------------------------------------------------------------
    def build_prompt(self, task: Task) -> str:
        return self.recipe.prompt(self, task)

    @property
    def stop_sequences(self) -> list[str]:
        """Where generation must pause *now*: read it before every generation (ToRL drops its
        stop string once the calls are spent; ZeroTIR alternates two)."""
        return self.recipe.stop_sequences(self)

    def is_final(self, action_text: str, calls: list[ToolCall]) -> bool:
        return self.recipe.is_final(self, action_text, calls)

    def observation_text(self, calls: list[ToolCall], texts: list[str], action_text: str) -> str:
        return self.recipe.observation(self, calls, texts, action_text)

    def outcome(self, task: Task, trajectory: Trajectory, actions: list[str]) -> RewardResult:
        answer = self.recipe.answer(self, actions)
        trajectory.metadata["answer"] = answer
        if task.answer is None:  # nothing to grade against (inference only)
            return RewardResult(0.0, {"has_gold": 0.0, "has_answer": float(answer is not None)})
        result = self.reward_fn(task, trajectory, actions, answer=answer)
        extra = self.recipe.extra_reward(self, trajectory, actions) if self.format_reward else {}
        return RewardResult(result.value + sum(extra.values()), {**result.components, **extra})

    # -- state the recipes read ---------------------------------------------------
    def calls_used(self, name: str) -> int:
        return self._calls_used.get(name, 0)

    @property
    def done(self) -> bool:
        return self._done

    # -- async: grade off the event loop ------------------------------------------
    async def astep(self, action: Any):
        """``TIREnv.astep``; a final answer is graded on the grader's threads first (then
        cached), so a slow symbolic check never blocks the event loop."""
        await self._pregrade(action)
        return await super().astep(action)

    async def _pregrade(self, action: Any) -> None:
        if self._done or self.task is None or self.task.answer is None:
            return
        tokens = action.get("tokens") if isinstance(action, dict) else action
        try:
            text = tokens if isinstance(tokens, str) else self.codec.decode(list(tokens))
        except Exception:  # noqa: BLE001 - a bad action is step's to reject, with its message
            return
        answer = self.recipe.answer(self, self.actions + [text])
        if answer is not None:
            await (self.grader or default_pool()).agrade(answer, gold_text(self.task.answer))

    # -- cleanup ------------------------------------------------------------------
    def close(self) -> None:
        super().close()
        if self._owns_tool:
            for tool in self.tools.values():
                tool.close()
