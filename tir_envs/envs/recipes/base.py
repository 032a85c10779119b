"""A recipe: one paper's protocol for the math-code environment.

``MathCodeEnv`` stays thin and asks its recipe for everything that differs between ToRL,
ZeroTIR and RITE: the prompt, the tool-call format, where generation stops, when an action ends
the episode, how tool output is shown, which text holds the answer, the reward values and any
extra reward term.  A recipe holds no episode state; it reads what it needs from the env.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tir_envs.formats.base import ToolCall, ToolCallFormat
from tir_envs.rewards.math.extract import extract_answer

if TYPE_CHECKING:
    from tir_envs.data.task import Task
    from tir_envs.envs.mathcode import MathCodeEnv
    from tir_envs.trajectory import Trajectory


@dataclass(frozen=True)
class RecipeDefaults:
    """Budgets and reward values a recipe starts from (constructor arguments override them)."""

    max_calls: int | None          # python calls per episode (ToRL's C, ZeroTIR's N_max)
    max_turns: int
    max_obs_tokens: int
    max_total_tokens: int           # prompt + everything after it
    correct_reward: float
    wrong_reward: float
    error_style: str                # how the sandbox reports errors: "full" or "last_line"


class Recipe:
    name = "base"
    chat = False                    # prompt through the chat template (else raw text)
    observation_role: str | None = None  # results come back as a chat message of this role
    defaults: RecipeDefaults

    def tool_format(self, env: "MathCodeEnv") -> ToolCallFormat:
        raise NotImplementedError

    def prompt(self, env: "MathCodeEnv", task: "Task") -> str:
        raise NotImplementedError

    def stop_sequences(self, env: "MathCodeEnv") -> list[str]:
        return env.format.stop_sequences

    def max_turns_for(self, max_calls: int | None) -> int:
        """Default turn budget for a given call budget."""
        return self.defaults.max_turns

    def is_final(self, env: "MathCodeEnv", text: str, calls: list[ToolCall]) -> bool:
        return not calls

    def observation(self, env: "MathCodeEnv", calls: list[ToolCall], texts: list[str],
                    action_text: str) -> str:
        return env.format.render_observation(calls, texts, action_text)

    def answer(self, env: "MathCodeEnv", actions: list[str]) -> str | None:
        """The policy's final answer: the last boxed answer in its own text."""
        return extract_answer("\n".join(actions))

    def extra_reward(self, env: "MathCodeEnv", trajectory: "Trajectory",
                     actions: list[str]) -> dict[str, float]:
        """Reward terms beyond the outcome (RITE's format reward), by component name."""
        return {}

    def describe(self) -> dict[str, Any]:
        return {"recipe": self.name, **self.defaults.__dict__}
