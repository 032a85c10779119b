"""ToRL (Li, Zou & Liu, 2025, "ToRL: Scaling Tool-Integrated RL"), as in its public code
(GAIR-NLP/ToRL @ cb78cf1c494c7595cf64385482918298fff5b7fb).

* Raw-text prompt (template ``tir_base_0309``) for a base model.
* The model writes a ```` ```python ```` block; generation stops at ```` ```output ````; the env
  runs the *last* complete code block of that action and inserts ``"\\n<output>\\n```\\n"`` so the
  text reads ```` ```output\\n…\\n``` ````.
* Output shown: on error only the last line; empty output shows ToRL's timeout message (a quirk
  of its sandbox wrapper, kept for fidelity); 256+ characters are cut to 128 + ``...`` + 128.
* ``C`` calls per response (``max_tool_calls``, default 1).  After the C-th call the stop string
  is dropped and any later code is not run: the next action ends the episode.
* Reward: +1 correct, -1 otherwise; optional -0.5 when code failed (``exec_error_penalty``).
"""

from __future__ import annotations

from tir_envs.formats.base import ToolCall
from tir_envs.formats.markdown import LastBlockFormat
from tir_envs.protocols.base import Budgets, EpisodeState
from tir_envs.protocols.math import MathProtocol, OutcomeValues

# The prompt template of the ToRL training script (data.template_type=tir_base_0309).
TORL_TEMPLATE = (
    "A conversation between User and Assistant. The user asks a question, and the Assistant "
    "solves it.\nUser: Please integrate natural language reasoning with programs to solve the "
    "problem above, and put your final answer within \\boxed{{}}.\n{question}\nAssistant:\n")
# What ToRL shows when the code printed nothing (its wrapper treats empty output as a timeout).
TORL_EMPTY_OUTPUT = "timeout_decorator.timeout_decorator.TimeoutError: 'Timed Out'"
OUTPUT_OPENER = "```output"


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


class ToRLProtocol(MathProtocol):
    name = "torl"
    chat = False
    # The authors budget the response (3072 tokens) apart from the prompt (400); the total is
    # the served context of their runs (4096), so a long prompt never eats the response.
    budgets = Budgets(max_turns=2, max_tool_calls=1, max_obs_tokens=512,
                      max_total_tokens=4096, max_response_tokens=3072)
    outcome_values = OutcomeValues(correct=1.0, wrong=-1.0)
    sandbox_error_style = "last_line"

    def __init__(self, stateful: bool = True) -> None:
        super().__init__(LastBlockFormat(stop=[OUTPUT_OPENER]))

    def tool_prompt(self, question: str) -> str:
        return TORL_TEMPLATE.format(question=question)

    def max_turns_for(self, max_calls: int | None) -> int:
        return (max_calls or 1) + 1

    def render_call(self, tool: str, body: str) -> str:
        return super().render_call(tool, body) + f"\n{OUTPUT_OPENER}"

    def stop_sequences(self, state: EpisodeState) -> list[str]:
        return [OUTPUT_OPENER] if state.calls_left("python") != 0 else []

    def is_final(self, text: str, calls: list[ToolCall], state: EpisodeState) -> bool:
        pausing = text.rstrip().endswith(OUTPUT_OPENER)
        return not (calls and pausing and state.calls_left("python") != 0)

    def observation(self, calls, texts, text, state) -> str:
        return f"\n{torl_output_text(texts[-1] if texts else '')}\n```\n"
