"""ZeroTIR (Mai et al., 2025, "Agent RL Scaling Law: Spontaneous Code Execution for
Mathematical Problem Solving"), as in its authors' public code (yyht/openrlhf_async_pipline @
d154c0a0966e45db4a76bcc80d76ee86cb03df4d).

* Raw-text prompt (template ``orz_tir``) ending in ``Assistant: <think>``; the answer goes in
  ``<answer>`` with ``\\boxed{}``.
* Two stop strings, alternating: generation first stops at ```` ```python ```` (the action is a
  pause: no call, nothing inserted), then at the closing ```` ``` ````; the block is run and
  ``"\\n```output\\n<result>\\n```\\n\\n\\n"`` is inserted.  (One stop list with both strings
  would stop at the opening fence, which starts with ```` ``` ````; ``stop_sequences`` changes
  with the episode, so read it before every generation.)
* Results longer than 256 tokens are replaced by ZeroTIR's "too long" notice.
* ``N_max`` calls (``max_tool_calls``, default 20); past it the env inserts "Tool call count has
  been exhausted. You can no longer call the tool." as the block's output and runs nothing.
* Generation stops at the first complete ``\\boxed{}`` the policy writes outside code (the
  paper's algorithm): the action holding it ends the episode, any call after it in that action
  is not run, and that box is the answer (``stop_at_box=True``, the default).  A generator's
  stop strings cannot match a balanced brace, so the env ends the episode at that action; the
  tokens generated after the box stay in the ledger.  ``ZeroTIRProtocol(stop_at_box=False)``
  runs on and grades the final box instead.
* Reward: 1 correct, 0 otherwise.
"""

from __future__ import annotations

from tir_envs.formats.base import ToolCall
from tir_envs.formats.markdown import MarkdownFormat
from tir_envs.protocols.base import Budgets, EpisodeState
from tir_envs.protocols.math import MathProtocol, OutcomeValues
from tir_envs.formats.boxed import boxed_spans
from tir_envs.answers.math import extract_final_answer

# The prompt template of the ZeroTIR evaluation/training code ('orz_tir').
ZEROTIR_TEMPLATE = (
    "A conversation between User and Assistant. The User asks a question, and the Assistant "
    "solves it. The Assistant first thinks about the reasoning process in the mind and then "
    "provides the User with the answer. The reasoning process is enclosed within <think> "
    "</think> and answer is enclosed within <answer> </answer> tags, respectively, i.e., <think> "
    "reasoning process here </think> <answer> answer here </answer>. In your reasoning-process, "
    "You can use python-code to solve your problem. User: You must put your answer inside "
    "<answer> </answer> tags, i.e., <answer> answer here </answer>. And your final answer will "
    "be extracted automatically by the \\boxed{{}} tag.\nThis is the problem:{question}\n"
    "Assistant: <think>")
OPEN_FENCE = "```python"
CLOSE_FENCE = "```"
TOO_LONG_NOTICE = "The output of the code execution is too long, please check your code."
MAX_RESULT_TOKENS = 256


def opens_block(text: str) -> bool:
    """Whether an action stopped right after opening a code block (a ZeroTIR pause)."""
    return text.rstrip().endswith(OPEN_FENCE)


class ZeroTIRProtocol(MathProtocol):
    name = "zerotir"
    chat = False
    budgets = Budgets(max_turns=43, max_tool_calls=20, max_obs_tokens=512,
                      max_total_tokens=1024 + 8192)
    outcome_values = OutcomeValues(correct=1.0, wrong=0.0)
    sandbox_error_style = "full"

    def __init__(self, stateful: bool = True, stop_at_box: bool = True) -> None:
        super().__init__(MarkdownFormat(stop=[OPEN_FENCE]))
        self.stop_at_box = stop_at_box

    def _first_box_end(self, prose: str) -> int | None:
        """End of the first complete box in ``prose`` (None: no box)."""
        spans = boxed_spans(prose)
        return spans[0][1] if spans else None

    def tool_prompt(self, question: str) -> str:
        return ZEROTIR_TEMPLATE.format(question=question)

    def max_turns_for(self, max_calls: int | None) -> int:
        # Each call takes two actions (open, close); then one refused attempt (it gets the
        # exhaustion notice) and the final answer.
        return 2 * (max_calls if max_calls is not None else 20) + 3

    def render_answer(self, text: str) -> str:
        return f"</think> <answer> The final answer is \\boxed{{{text}}} </answer>"

    def stop_sequences(self, state: EpisodeState) -> list[str]:
        paused = state.actions and opens_block(state.actions[-1]) and not state.done
        return [CLOSE_FENCE] if paused else [OPEN_FENCE]

    def parse(self, text: str, state: EpisodeState) -> list[ToolCall]:
        """The block this action closes; its opening fence may end the previous action."""
        prefix = OPEN_FENCE if state.actions and opens_block(state.actions[-1]) else ""
        combined = prefix + text
        calls = self.format.parse(combined)
        if not calls or calls[-1].end != len(combined.rstrip()):
            return []
        call, shift = calls[-1], len(prefix)
        return [ToolCall(call.name, call.arguments, call.raw, max(call.start - shift, 0),
                         call.end - shift)]

    def is_final(self, text: str, calls: list[ToolCall], state: EpisodeState) -> bool:
        prefix = OPEN_FENCE if state.actions and opens_block(state.actions[-1]) else ""
        if self.stop_at_box and self._first_box_end(self.format.prose(prefix + text)) is not None:
            return True  # generation stops at the box; nothing after it runs
        return not calls and not opens_block(text)

    def answer(self, state: EpisodeState) -> str | None:
        if not self.stop_at_box:
            return super().answer(state)
        prose = self.format.prose("\n".join(state.actions))
        end = self._first_box_end(prose)
        return extract_final_answer(prose if end is None else prose[:end],
                                    fallback=self.extraction == "fallback")

    def observation(self, calls, texts, text, state) -> str:
        block = f"\n```output\n{texts[-1] if texts else ''}\n```\n\n\n"
        if len(state.codec.encode(block)) > MAX_RESULT_TOKENS:
            block = f"\n```output\n{TOO_LONG_NOTICE}\n```\n\n\n"
        return block
