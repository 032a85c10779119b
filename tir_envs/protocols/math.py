"""What the math protocols (ToRL, ZeroTIR, RITE) share: the boxed answer, reward defaults, and
the standalone prompt of the "w/o tools" ablation."""

from __future__ import annotations

from dataclasses import dataclass

from tir_envs.protocols.base import Budgets, EpisodeState, Protocol
from tir_envs.answers.math import extract_final_answer

#: the usual chain-of-thought instruction for math without tools (Qwen2.5-Math's wording)
STANDALONE_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


@dataclass(frozen=True)
class OutcomeValues:
    """The outcome reward a math paper gives a correct answer and a wrong (or missing) one."""

    correct: float = 1.0
    wrong: float = 0.0


EXTRACTIONS = ("boxed", "fallback")


class MathProtocol(Protocol):
    """A math protocol: the answer is the final ``\\boxed{}`` the policy wrote outside its code
    (several boxes kept together when they form one list answer).  ``extraction="fallback"``
    also reads an unboxed final answer ("the final answer is ...", the last ``$...$``): for
    evaluation suites that ask for it; the RL protocols keep ``"boxed"``."""

    budgets = Budgets()
    #: the paper's outcome reward values (the env's reward defaults)
    outcome_values = OutcomeValues()
    #: how the paper's executor shows a failed run: the whole traceback ("full") or its
    #: last line ("last_line"); the env's sandbox is configured to match
    sandbox_error_style = "full"
    extraction = "boxed"

    def tool_prompt(self, question: str):
        raise NotImplementedError

    def prompt(self, task, use_tools: bool = True):
        if use_tools:
            prompt = self.tool_prompt(task.question)
            if self.chat and isinstance(prompt, str):  # a raw-text paper asked for chat mode
                return [{"role": "user", "content": prompt}]
            return prompt
        if self.chat:
            return [{"role": "user", "content": f"{task.question}\n{STANDALONE_INSTRUCTION}"}]
        return f"User: {task.question}\n{STANDALONE_INSTRUCTION}\nAssistant:\n"

    def max_turns_for(self, max_calls: int | None) -> int:
        """Default turn budget for a given call budget."""
        return self.budgets.max_turns

    def render_answer(self, text: str) -> str:
        return f"The final answer is \\boxed{{{text}}}."

    def answer(self, state: EpisodeState) -> str | None:
        """Read from the policy's prose: a box inside its code is the tool's input, not an
        answer (``format.prose``)."""
        return extract_final_answer(self.format.prose("\n".join(state.actions)),
                                    fallback=self.extraction == "fallback")
