"""RITE (Chen, Yang et al., 2025, "Reinforcement Learning for Tool-Integrated Interleaved
Thinking towards Cross-Domain Generalization"): Plan-Action-Reflection cycles in a chat model.

* Chat prompt: a system message that describes the ``python`` and ``answer`` tools, then the
  question.  Each turn the model thinks in ``<think>…</think>`` and makes one call,
  ``<tool_call>{"name": "python", "arguments": {"code": …}}</tool_call>``; generation stops at
  ``</tool_call>``.
* Results come back as a ``tool`` chat message: the template glue around it (closing the
  assistant turn, opening the next one) is env tokens with loss mask 0.
* ``answer`` ends the episode; its ``answer`` argument is graded (a boxed answer inside it is
  unwrapped).  Without an answer call, the last boxed answer of the policy's text is graded.
* Reward (the paper's eq. 8): R_outcome = +1 correct, -1 otherwise, plus the format reward
  (``interleaved_format_score``): +1 for a clean cycle, 0 for minor issues, -1 for a broken
  one.  So a wrong answer in a clean cycle scores 0, below a right answer with a minor format
  slip (+1).  ``wrong_reward=0.0`` on the env gives the 1/0 outcome of earlier versions.
* Turns: up to ``max_turns`` = 200 (the paper's cap); the context budget (1024 + 8192 tokens,
  ``max_total_tokens``) is what ends a long episode first.
The paper's code is not public; tool names, stop string and the format rules here follow the
paper's description and the Hermes/Qwen tool-call convention.
"""

from __future__ import annotations

import json

from tir_envs.formats.json_calls import JsonFormat
from tir_envs.protocols.base import Budgets, EpisodeState
from tir_envs.protocols.math import MathProtocol, OutcomeValues
from tir_envs.answers.math import extract_final_answer
from tir_envs.protocols.interleave import interleaved_format_score

ANSWER_TOOL = "answer"


def tool_schemas(stateful: bool) -> list[dict]:
    memory = ("Variables and imports persist between calls. " if stateful
              else "Each call starts a fresh interpreter. ")
    return [
        {"type": "function", "function": {
            "name": "python",
            "description": "Execute Python code and return what it prints, or the error. "
                           + memory + "Print the values you need to see.",
            "parameters": {"type": "object", "required": ["code"], "properties": {
                "code": {"type": "string", "description": "Python source to run."}}}}},
        {"type": "function", "function": {
            "name": ANSWER_TOOL,
            "description": "Give the final answer. Call it once, at the end; it ends the task.",
            "parameters": {"type": "object", "required": ["answer"], "properties": {
                "answer": {"type": "string",
                           "description": "The final answer in LaTeX, e.g. \\boxed{42}."}}}}},
    ]


#: RITE's instructions without any tool description (a family's template renders the tools)
INSTRUCTIONS = (
    "Solve the math problem by alternating between thinking and running code.\n"
    "Every turn has two parts, in this order:\n"
    "1. <think> ... </think>: plan the next step, or reflect on the last tool result.\n"
    "2. Exactly one tool call.\n"
    "Keep cycling until you are sure, then call the answer tool.")


def system_prompt(stateful: bool) -> str:
    tools = "\n".join(json.dumps(t, ensure_ascii=False) for t in tool_schemas(stateful))
    return (
        INSTRUCTIONS + "\n\n"
        "# Tools\n\nThe available functions, as JSON signatures:\n<tools>\n" + tools +
        "\n</tools>\n\nTo call a function, write its name and arguments as one JSON object "
        "between tags:\n<tool_call>\n{\"name\": \"<function name>\", \"arguments\": "
        "{<argument object>}}\n</tool_call>")


class RITEProtocol(MathProtocol):
    name = "rite"
    chat = True
    observation_role = "tool"
    budgets = Budgets(max_turns=200, max_tool_calls=None, max_obs_tokens=1024,
                      max_total_tokens=1024 + 8192)
    outcome_values = OutcomeValues(correct=1.0, wrong=-1.0)  # eq. 8: R_outcome = ±1
    sandbox_error_style = "full"

    def __init__(self, stateful: bool = True) -> None:
        super().__init__(JsonFormat())
        self.stateful = stateful

    def tool_prompt(self, question: str):
        system = INSTRUCTIONS if self.native_tools else system_prompt(self.stateful)
        return [{"role": "system", "content": system}, {"role": "user", "content": question}]

    def tool_schemas(self) -> list[dict]:
        return tool_schemas(self.stateful)

    def render_call(self, tool: str, body: str) -> str:
        """A clean cycle turn: a thought, then exactly one call."""
        return f"<think>I call {tool}.</think>\n{super().render_call(tool, body)}"

    def render_answer(self, text: str) -> str:
        return self.render_call(ANSWER_TOOL, f"\\boxed{{{text}}}")

    def max_turns_for(self, max_calls: int | None) -> int:
        return self.budgets.max_turns if max_calls is None else max_calls + 2

    def is_final(self, text, calls, state: EpisodeState) -> bool:
        return not calls or any(c.name == ANSWER_TOOL for c in calls)

    def observation(self, calls, texts, text, state: EpisodeState) -> str:
        if len(texts) == 1:
            return texts[0].strip("\n")
        return "\n".join(f"<tool_response>\n{t.strip(chr(10))}\n</tool_response>" for t in texts)

    def answer(self, state: EpisodeState) -> str | None:
        for call in reversed(self.format.parse(state.actions[-1]) if state.actions else []):
            if call.name == ANSWER_TOOL and not call.error:
                value = call.arguments.get("answer")
                if value is not None:
                    text = str(value)
                    return extract_final_answer(text) or text.strip() or None
        return super().answer(state)

    def extra_reward(self, state: EpisodeState):
        score, issues = interleaved_format_score(state.actions, self.format, ANSWER_TOOL,
                                                 eos_text=state.codec.eos_text)
        return {"format": score}, {"format_issues": issues}
