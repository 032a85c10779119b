"""AutoTIR (Wei et al. 2025, "AutoTIR: Autonomous Tools Integrated Reasoning via Reinforcement
Learning"): one chat model that decides whether and which tool to use.

* A system prompt describes the tags (the authors' ``autotir_template_sys`` convention, in our
  own words): reasoning in ``<think>…</think>``; ``<search>query</search>`` for retrieval and
  ``<code>…</code>`` for Python; results come back inside ``<result>…</result>`` right after the
  action (env tokens, loss mask 0); the final answer inside ``<answer>…</answer>`` with the
  exact answer in ``\\boxed{}``.  Generation pauses at ``</search>``, ``</code>`` or
  ``</answer>``.
* An action without a tool call ends the episode (the answer, or a direct answer without any
  tool); otherwise the episode goes on until the turn or token budget (the paper: "until the
  answer or the length limit").
* The answer (``tir_envs.answers.autotir.final_answer``) is read from the final action outside
  ``<think>``: the last box of its ``<answer>`` block, else the block's text, else its last
  box; a writing task without either is answered by the response text itself; a
  multiple-choice task by the one option letter the response chooses.  The env hands this one
  reading to ``AutoTIRReward``.
* Two prompt modes: tool-assisted, and standalone (the "w/o tools" ablation: same answer format,
  no tools described, one action).
"""

from __future__ import annotations

from tir_envs.formats.tags import TagsFormat, TagSpec
from tir_envs.protocols.base import Budgets, EpisodeState, Protocol
from tir_envs.answers.autotir import final_answer

AUTOTIR_TAGS = (TagSpec("search", "search", "query", "result"),
                TagSpec("code", "python", "code", "result"))

TOOL_PROMPT = (
    "You are a helpful assistant that solves the given task step by step and may use tools: a "
    "Wikipedia search for facts and Python code execution for calculation. Think first, "
    "inside <think> and </think>. When a fact is missing, write a search query between "
    "<search> and </search>; when something needs computing, write Python code between "
    "<code> and </code> and print what you need. Each tool's output comes back between "
    "<result> and </result>. Use a tool only when it helps; you may answer directly. Give the "
    "answer between <answer> and </answer>, with the exact final answer inside \\boxed{}, "
    "e.g. <answer> The final answer is \\boxed{Paris} </answer>.")
STANDALONE_PROMPT = (
    "You are a helpful assistant that solves the given task step by step from your own "
    "knowledge, without tools. Think first, inside <think> and </think>. Give the answer "
    "between <answer> and </answer>, with the exact final answer inside \\boxed{}, e.g. "
    "<answer> The final answer is \\boxed{Paris} </answer>.")


class AutoTIRProtocol(Protocol):
    """The AutoTIR protocol (see the module docstring)."""

    name = "autotir"
    chat = True
    budgets = Budgets(max_turns=8, max_tool_calls=None, max_obs_tokens=512,
                      max_total_tokens=512 + 8192)
    standalone_stops = ("</answer>",)

    def __init__(self) -> None:
        super().__init__(TagsFormat(AUTOTIR_TAGS))

    def prompt(self, task, use_tools: bool = True):
        system = TOOL_PROMPT if use_tools else STANDALONE_PROMPT
        return [{"role": "system", "content": system}, {"role": "user", "content": task.question}]

    def stop_sequences(self, state: EpisodeState) -> list[str]:
        return self.format.stop_sequences + list(self.standalone_stops)

    def render_answer(self, text: str) -> str:
        return f"<answer> The final answer is \\boxed{{{text}}} </answer>"

    def answer(self, state: EpisodeState) -> str | None:
        return final_answer(state.actions, state.task.meta.get("domain"))
