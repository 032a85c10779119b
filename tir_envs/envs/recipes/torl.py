"""ToRL (Li, Zou & Liu, 2025, "ToRL: Scaling Tool-Integrated RL"), as in its public code
(GAIR-NLP/ToRL @ cb78cf1c494c7595cf64385482918298fff5b7fb).

* Raw-text prompt (template ``tir_base_0309``) for a base model.
* The model writes a ```` ```python ```` block; generation stops at ```` ```output ````; the env
  runs the *last* complete code block of that action and inserts ``"\\n<output>\\n```\\n"`` so the
  text reads ```` ```output\\n…\\n``` ````.
* Output shown: on error only the last line; empty output shows ToRL's timeout message (a quirk
  of its sandbox wrapper, kept for fidelity); 256+ characters are cut to 128 + ``...`` + 128.
* ``C`` calls per response (``max_calls``, default 1).  After the C-th call the stop string is
  dropped and any later code is not run: the next action ends the episode.
* Reward: +1 correct, -1 otherwise; optional -0.5 when code failed (``exec_error_penalty``).
"""

from __future__ import annotations

import re

from tir_envs.envs.recipes.base import Recipe, RecipeDefaults
from tir_envs.formats.base import ToolCall
from tir_envs.formats.markdown import MarkdownFormat

# The prompt template of the ToRL training script (data.template_type=tir_base_0309).
TORL_TEMPLATE = (
    "A conversation between User and Assistant. The user asks a question, and the Assistant "
    "solves it.\nUser: Please integrate natural language reasoning with programs to solve the "
    "problem above, and put your final answer within \\boxed{{}}.\n{question}\nAssistant:\n")
# What ToRL shows when the code printed nothing (its wrapper treats empty output as a timeout).
TORL_EMPTY_OUTPUT = "timeout_decorator.timeout_decorator.TimeoutError: 'Timed Out'"
OUTPUT_OPENER = "```output"
_OPEN_BLOCK = re.compile(r"```python[ \t]*\n")


def torl_output_text(text: str) -> str:
    """ToRL's post-processing of one execution result (see the module docstring)."""
    if "Error" in text:
        text = text.strip().split("\n")[-1]
    if not text.strip():
        text = TORL_EMPTY_OUTPUT
    text = text.strip()
    if len(text) >= 256:
        text = text[:128] + "..." + text[-128:]
    return text


class LastBlockFormat(MarkdownFormat):
    """Markdown blocks, of which only the last complete one before ```` ```output ```` runs.

    As in ToRL, an action whose last ```` ```python ```` block is unterminated runs nothing.
    """

    def parse(self, text: str) -> list[ToolCall]:
        visible = self.visible(text)
        calls = super().parse(visible)
        if not calls:
            return []
        last = calls[-1]
        if _OPEN_BLOCK.search(visible, last.end):
            return []
        return [last]


class ToRLRecipe(Recipe):
    name = "torl"
    chat = False
    defaults = RecipeDefaults(max_calls=1, max_turns=2, max_obs_tokens=512,
                              max_total_tokens=400 + 3072, correct_reward=1.0,
                              wrong_reward=-1.0, error_style="last_line")

    def tool_format(self, env):
        return LastBlockFormat(stop=[OUTPUT_OPENER])

    def prompt(self, env, task):
        return TORL_TEMPLATE.format(question=task.question)

    def max_turns_for(self, max_calls):
        return (max_calls or 1) + 1

    def _calls_left(self, env) -> bool:
        budget = env.tool_budget("python")
        return budget is None or env.calls_used("python") < budget

    def stop_sequences(self, env):
        return [OUTPUT_OPENER] if self._calls_left(env) else []

    def is_final(self, env, text, calls):
        return not (calls and text.rstrip().endswith(OUTPUT_OPENER) and self._calls_left(env))

    def observation(self, env, calls, texts, action_text):
        shown = torl_output_text(texts[-1] if texts else "")
        return f"\n{shown}\n```\n"
