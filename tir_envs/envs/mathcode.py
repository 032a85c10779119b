"""``tir/MathCode-v0``: reason, run Python, read the output, answer in ``\\boxed{}``.

The ToRL / ZeroTIR / RITE setting.  ``protocol`` picks the paper whose protocol the env follows
(prompt, tool-call format, stop strings, output rendering, budgets, reward defaults; see
``tir_envs.protocols``).  With no arguments the env runs ToRL on the shipped MATH-500 tasks
with the bundled Qwen2.5 tokenizer and the local Python sandbox, one stateful interpreter per
episode (``stateful=False`` reproduces the papers' one-shot executors).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from tir_envs.data.math import load_math_tasks
from tir_envs.env import TIREnv, reject_wiring
from tir_envs.envs.tooling import pop_tool_config
from tir_envs.protocols import MathProtocol, math_protocol
from tir_envs.rewards.math.pool import GraderPool
from tir_envs.rewards.math.reward import MathReward
from tir_envs.tools.base import Tool
from tir_envs.validation import check_positive_int


class MathCodeEnv(TIREnv):
    """Math with a Python interpreter, following one paper's protocol.

    ``protocol``: ``"torl"`` (default), ``"zerotir"``, ``"rite"`` or a ``MathProtocol``.
    ``tasks``: Tasks/dicts, a shipped dataset name (``math500``, ``aime2024``, ``aime2025``,
    ``gsm8k``), or a JSONL/Parquet path; default MATH-500.
    ``tool``: a ``Tool`` named ``python`` to use instead of the sandbox built from ``backend``,
    ``stateful`` and ``tool_timeout_s`` (``tir_envs.envs.tooling``: local, stateful, 10 s).
    ``max_tool_calls``: python calls per episode (ToRL's C = 1, ZeroTIR's N_max = 20, RITE: no
    cap beyond ``max_turns``).  Other budgets default to the protocol's values.
    Reward: ``reward`` (a ``MathReward``), or one built from ``correct_reward``/``wrong_reward``
    (protocol defaults: ToRL +1/-1, others 1/0), ``exec_error_penalty`` (ToRL's 0.5, off by
    default), ``tool_penalty`` (VerlTool's R_tool: -0.25 on a wrong answer),
    ``tool_penalties`` (the -0.25 terms of VerlTool's reward code, see ``MathReward``) and
    ``grader``
    (a ``GraderPool``; default: the process-wide one).  ``chat``: ToRL and ZeroTIR run raw text
    (base models) unless ``chat=True``; RITE is chat only.
    ``format_reward``: RITE's format term of the rubric, on by default (``False`` weighs it 0).
    Every other keyword is ``TIREnv``'s, passed through as given: the budgets
    (``max_obs_tokens``, ``max_total_tokens``, ...), ``use_tools``, ``render_mode``, chat mode
    per model family (``renderer``/``thinking``/``observation_role``, docs/chat_models.md),
    ``reward_weights``.
    ``extraction``: ``"boxed"`` (the RL protocols') or ``"fallback"`` (also an unboxed final
    answer; for evaluation).
    """

    env_id = "tir/MathCode-v0"
    default_tasks = "math500"
    configured_tools = ("python",)
    scoring = "math"
    # evaluation reads an unboxed final answer too ("The final answer is $9$"); RL keeps boxes
    eval_kwargs = {"protocol": "torl", "extraction": "fallback"}
    eval_options = ("protocol",)

    def __init__(self, protocol: str | MathProtocol = "torl", tasks: Any = None,
                 tokenizer: Any = None, tool: Tool | None = None,
                 max_tool_calls: int | None = None, max_turns: int | None = None,
                 reward: MathReward | None = None, correct_reward: float | None = None,
                 wrong_reward: float | None = None, exec_error_penalty: float = 0.0,
                 tool_penalties: Mapping[str, float] | None = None, tool_penalty: float = 0.0,
                 format_reward: bool = True, grader: GraderPool | None = None,
                 extraction: str = "boxed", chat: bool | None = None, **kwargs: Any):
        reject_wiring(kwargs, "MathCodeEnv", "Pick protocol='torl'|'zerotir'|'rite' (or pass a "
                      "MathProtocol), and tool= for your own python tool.")
        python = pop_tool_config(kwargs, "python")["python"]
        proto = math_protocol(protocol, python.stateful, extraction)
        if chat is False and isinstance(proto.tool_prompt("q"), list):
            raise ValueError(f"the {proto.name} protocol is chat only (its prompt is chat "
                             "messages); leave chat unset, or pick protocol='torl'/'zerotir'")
        check_positive_int(max_tool_calls=max_tool_calls, max_turns=max_turns, allow_none=True)
        if tool is not None and (not isinstance(tool, Tool) or tool.name != "python"):
            raise TypeError(f"tool must be a Tool named 'python', got {tool!r}")
        calls = max_tool_calls if max_tool_calls is not None else proto.budgets.max_tool_calls
        self.stateful = python.stateful
        self._owns_tool = tool is None
        tool = tool or python.build(proto.sandbox_error_style)
        reward = reward or MathReward(
            correct_reward=proto.outcome_values.correct if correct_reward is None
            else correct_reward,
            wrong_reward=proto.outcome_values.wrong if wrong_reward is None else wrong_reward,
            exec_error_penalty=exec_error_penalty, tool_penalties=dict(tool_penalties or {}),
            tool_penalty=tool_penalty, grader=grader)
        if not format_reward:  # RITE's format term left out of the rubric
            kwargs["reward_weights"] = {**(kwargs.get("reward_weights") or {}), "format": 0.0}
        super().__init__(
            tokenizer=tokenizer, tasks=tasks, protocol=proto, tools=[tool], reward=reward,
            max_turns=max_turns or proto.max_turns_for(calls),
            max_tool_calls=None if calls is None else {"python": calls}, chat=chat, **kwargs)
        self.format_reward = format_reward

    def load_tasks(self, source: str) -> Sequence[Any]:
        return load_math_tasks(source)

    def on_close(self) -> None:
        if self._owns_tool:
            for tool in self.tools.values():
                tool.close()
