"""Overhead of a no-tool ``step``, side by side with a bare tokenizer encode of the same text.

Prints JSON.  ``step_us`` is the median time of ``env.step(ids)`` for an action that calls no
tool (ledger append, decode to look for calls, budget checks); ``encode_us`` is the median
time to encode the same action text with the same (Rust) tokenizer, the least a text-based
pipeline would pay.  Goal: ``step_us`` <= 100.

Chat mode (``chat_*``): one tool-calling turn and its observation, timed as reset + step of an
in-process echo tool, in raw text (tags, the same schema in the prompt, the result inside the turn) and through a family's renderer
(Qwen3, the call in its ``<tool_call>`` syntax, the result bridged as a ``tool`` message).
``chat_over_raw`` is their ratio; goal <= 1.5.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tir_envs.bench.perf.quick import QUICK, pick  # noqa: E402

from tir_envs.chat.vocab import qwen3_tokenizer  # noqa: E402
from tir_envs.env import TIREnv  # noqa: E402
from tir_envs.formats.json_calls import JsonFormat  # noqa: E402
from tir_envs.protocols.base import Protocol  # noqa: E402
from tir_envs.tools.base import Tool, ToolResult  # noqa: E402

ACTION = ("Let me think about this step by step. The sum of the first n integers is "
          "n(n+1)/2, so for n = 100 we get 5050. I am fairly confident in this result.")


class ThinkingEnv(TIREnv):
    """A turn without a tool call that does not end the episode (pure thinking)."""

    def is_final(self, action_text, calls):
        return False


class Echo(Tool):
    name = "python"

    async def call(self, arguments, session=None):
        return ToolResult(f"echo:{arguments.get('code', '')}")


class NativeProtocol(Protocol):
    """A generic protocol whose one tool is declared by schema (rendered by the family)."""

    def tool_schemas(self):
        return [{"type": "function", "function": {"name": "python", "description": "Run code.",
                 "parameters": {"type": "object", "properties": {"code": {"type": "string"}}}}}]


def turn_us(env, ids, repeats: int) -> float:
    """Median of reset + one tool-calling step (its observation included)."""
    def one():
        env.reset(seed=0)
        env.step(ids)
    for _ in range(pick(200, 20)):
        one()
    return median_us(one, repeats)


def chat_overhead(repeats: int) -> dict:
    schema = json.dumps(NativeProtocol(JsonFormat()).tool_schemas()[0])
    raw = TIREnv(tasks=["What is 6 * 7?"], tools=[Echo()], chat=False,  # the same tool text
                 system_prompt=f"Call the tool as <python>code</python>. Tool: {schema}")
    raw_ids = raw.codec.encode("Let me run it. <python>print(6 * 7)</python>")
    tok = qwen3_tokenizer()
    chat = TIREnv(tokenizer=tok, tasks=["What is 6 * 7?"], tools=[Echo()],
                  protocol=NativeProtocol(JsonFormat()), observation_role="tool",
                  renderer="qwen3", thinking="on")
    chat.reset(seed=0)
    text = chat.protocol.format.render_call("python", "print(6 * 7)")
    chat_ids = tok.encode("<think>\nLet me run it.\n</think>\n\n" + text,
                          add_special_tokens=False)
    raw_us, chat_us = turn_us(raw, raw_ids, repeats), turn_us(chat, chat_ids, repeats)
    return {"chat_renderer": chat.chat.renderer.describe(), "raw_turn_us": round(raw_us, 1),
            "chat_turn_us": round(chat_us, 1), "chat_over_raw": round(chat_us / raw_us, 2),
            "goal_chat_over_raw": 1.5, "chat_meets_goal": chat_us <= 1.5 * raw_us}


def median_us(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t)
    return statistics.median(times) / 1000


def main(repeats: int = pick(20000, 300)) -> dict:
    env = ThinkingEnv(tasks=["What is 1 + 2 + ... + 100?"], max_turns=10 ** 9,
                      max_total_tokens=10 ** 9)
    env.reset(seed=0)
    ids = env.codec.encode(ACTION)
    encode = env.codec._backend.encode
    for _ in range(pick(500, 50)):  # warm up both paths
        env.step(ids)
        encode(ACTION, add_special_tokens=False)
    step_us = median_us(lambda: env.step(ids), repeats)
    encode_us = median_us(lambda: encode(ACTION, add_special_tokens=False), repeats)

    terminal = TIREnv(tasks=["q"])
    samples = []
    for _ in range(pick(2000, 100)):
        terminal.reset(seed=0)
        t = time.perf_counter_ns()
        terminal.step(ids)
        samples.append(time.perf_counter_ns() - t)
    result = {
        "benchmark": "env_step",
        "action_tokens": len(ids),
        "step_us": round(step_us, 2),
        "terminal_step_us": round(statistics.median(samples) / 1000, 2),
        "encode_us": round(encode_us, 2),
        "step_over_encode": round(step_us / encode_us, 2),
        "goal_step_us": 100,
        "meets_goal": step_us <= 100,
        **chat_overhead(pick(2000, 100)),
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
