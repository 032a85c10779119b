"""Train an OpenAI Agents SDK agent on arithmetic with the bundled GRPO trainer, on CPU.

The agent is ordinary Agents SDK code (``Agent`` + ``Runner`` + a ``@function_tool``, the
model an ``OpenAIChatCompletionsModel`` whose client points at the gateway): it knows nothing
of training.  ``AgentGRPOTrainer`` runs it through a ``Gateway`` over a tiny random Qwen2 built
in code, and GRPO updates the model on the episodes' ledgers.  The reward is the host's: the
first digit of the policy's final answer against the task's gold, never what the agent returns.

Why a tiny model can learn it in minutes (the toy task's recipe, ``toy_env.py``): the model's
tokenizer (``math_tokenizer``) has 8 tokens: the chat template's two control tokens, ``<unk>``,
the digits 0-3 and one token that is a whole Hermes tool call,
``<tool_call>\n{"name": "calculator", "arguments": {}}\n</tool_call>``.  Every other stretch of
text (the instructions, the tool schema, the question, written in words) is one ``<unk>`` id,
so the question is invisible to the model: only the calculator's result carries the answer,
and the reward (``CalculatorAnswer``) counts an answer only after a calculator call the policy
made, so guessing earns nothing.  A random model calls and then copies the right digit about
one time in 64; GRPO makes the call and the copy the rule.  The chat template is ChatML with
Hermes calls (``<tool_call>`` JSON in the assistant turn, results in ``<tool_response>``), and
the gateway parses calls with the project's Hermes parser (``tir_envs.formats.json_calls``).

    python -m tir_envs.trainers.grpo.agents_math --steps 40 --out docs   # writes the curve JSON + SVG
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import random
import re
import sys
import time
import weakref
from pathlib import Path
from typing import Any, Sequence

from tir_envs.chat.renderer import ChatRenderer
from tir_envs.formats.base import ToolCall
from tir_envs.formats.json_calls import JsonFormat
from tir_envs.rewards.base import Reward, RewardResult

MODEL = "tir-policy"
CALL_TEXT = '<tool_call>\n{"name": "calculator", "arguments": {}}\n</tool_call>'
SPECIAL = ["<|im_start|>", "<|im_end|>", "<unk>", CALL_TEXT]
NUM_VALUES = 4  # sums 0-3: the answer digits, and the only digits the model can write
DIGITS = [str(d) for d in range(NUM_VALUES)]
NUMBER_WORDS = ["zero", "one", "two", "three"]
INSTRUCTIONS = "Use the calculator tool, then reply with the number only."

#: ChatML with Hermes calls over the tiny vocabulary (a call renders exactly as ``CALL_TEXT``)
CHAT_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n"
    "{% if messages[0].role == 'system' %}{{ messages[0].content }}\n\n{% endif %}"
    "# Tools\n<tools>{% for t in tools %}\n{{ t | tojson }}{% endfor %}\n</tools><|im_end|>\n"
    "{% elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}"
    "<|im_end|>\n{% endif %}"
    "{% for m in messages %}"
    "{% if m.role == 'system' %}"
    "{% elif m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n"
    "</tool_response><|im_end|>\n"
    "{% elif m.role == 'assistant' %}<|im_start|>assistant\n{{ m.content or '' }}"
    "{% for c in m.tool_calls or [] %}<tool_call>\n{\"name\": \"{{ c.function.name }}\", "
    "\"arguments\": {{ c.function.arguments | tojson }}}\n</tool_call>{% endfor %}"
    "<|im_end|>\n"
    "{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@functools.lru_cache(maxsize=1)
def math_tokenizer():
    """The 8-token vocabulary of the module docstring, with its chat template."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(SPECIAL + DIGITS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"\d"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL])
    out = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                  pad_token="<|im_end|>", unk_token="<unk>",
                                  clean_up_tokenization_spaces=False)
    out.chat_template = CHAT_TEMPLATE
    return out


def math_tasks(n: int = 64, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` additions written in words whose sums cover 0-3 equally (so no fixed guess beats
    chance), shuffled."""
    pairs = {s: [(a, s - a) for a in range(s + 1)] for s in range(NUM_VALUES)}
    rng = random.Random(seed)
    out = []
    for i in range(n):
        total = i % NUM_VALUES
        a, b = rng.choice(pairs[total])
        out.append({"id": f"add-{i}", "question": f"What is {NUMBER_WORDS[a]} plus "
                    f"{NUMBER_WORDS[b]}?", "a": a, "b": b, "answer": str(total)})
    rng.shuffle(out)
    return out


class HermesCalls(ChatRenderer):
    """The tiny vocabulary's family: ChatML turns, Hermes ``<tool_call>`` JSON calls."""

    family = "chatml-hermes-tiny"
    renders_tools = True

    def __init__(self, tokenizer: Any):
        super().__init__(tokenizer)
        self._calls = JsonFormat()

    def stop_token_ids(self) -> tuple[int, ...]:
        return (self.tokenizer.convert_tokens_to_ids("<|im_end|>"),)

    def parse_calls(self, text: str) -> list[ToolCall]:
        return self._calls.parse(text)


class FirstDigit:
    """How the example's answer is written: the first digit of the policy's final content (the
    protocol's one reading, ``read(task, actions)``, which the gateway hands the reward)."""

    def read(self, task: Any, actions: Sequence[str]) -> str | None:
        digit = re.search(r"\d", actions[-1] if actions else "")
        return digit.group(0) if digit else None


class CalculatorAnswer(Reward):
    """1 when the first digit of the policy's final answer is the sum **and** the policy
    called the calculator before it (a turn of the ledger with a call the gateway parsed from
    sampled tokens); a guess earns nothing.  Reads only what the policy wrote."""

    def score(self, task: Any, trajectory: Any, answer: Any) -> RewardResult:
        called = trajectory is not None and any(t.tool_calls for t in trajectory.turns)
        correct = called and answer == task["answer"]
        return RewardResult(float(correct), {"correct": float(correct), "called": float(called)},
                            correct=correct, answered=answer is not None)


async def agents_sdk_agent(task: dict[str, Any], base_url: str, api_key: str) -> str | None:
    """The agent: Agents SDK code as anyone writes it, pointed at ``base_url``."""
    from agents import (Agent, MaxTurnsExceeded, ModelBehaviorError, OpenAIChatCompletionsModel,
                        Runner, function_tool, set_tracing_disabled)
    from openai import AsyncOpenAI

    set_tracing_disabled(True)  # no trace upload: the run is offline

    @function_tool
    def calculator() -> str:
        """Evaluate the arithmetic problem in the user's message exactly."""
        return str(task["a"] + task["b"])

    # a generous timeout: on a loaded CPU box a call can queue behind a whole batch
    client = AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=300.0,
                         http_client=_http_client())
    agent = Agent(name="arithmetic", instructions=INSTRUCTIONS, tools=[calculator],
                  model=OpenAIChatCompletionsModel(MODEL, client))
    try:
        result = await Runner.run(agent, task["question"], max_turns=3)
    except (MaxTurnsExceeded, ModelBehaviorError):
        # the policy kept calling, or wrote nothing the SDK accepts: the run ends without an
        # answer and the host's reward is 0 (it is the policy's doing, not an infra failure)
        return None
    return str(result.final_output)


_CLIENTS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any]" = None  # type: ignore


def _http_client() -> Any:
    """One HTTP client per event loop for every run: building one loads the CA bundle (~0.2 s
    a client here), which would cost more than the episode."""
    global _CLIENTS
    from openai import DefaultAsyncHttpxClient

    if _CLIENTS is None:
        _CLIENTS = weakref.WeakKeyDictionary()
    loop = asyncio.get_running_loop()
    if loop not in _CLIENTS:
        _CLIENTS[loop] = DefaultAsyncHttpxClient()
    return _CLIENTS[loop]


def config(overrides: list[str] = ()):
    from tir_envs.trainers.grpo.config import GRPOConfig

    return GRPOConfig.load(Path(__file__).parent / "configs" / "agents_math.yaml",
                           list(overrides))


def trainer(overrides: list[str] = (), tasks: int = 64):
    """The example's trainer (the config ``configs/agents_math.yaml`` plus ``overrides``)."""
    from tir_envs.trainers.grpo.agent_rollout import AgentGRPOTrainer

    c = config(overrides)
    tok = math_tokenizer()
    return AgentGRPOTrainer(c, agents_sdk_agent, math_tasks(tasks, c.train.seed),
                            CalculatorAnswer(), renderer=HermesCalls(tok), tokenizer=tok,
                            protocol=FirstDigit())


def train(steps: int, overrides: list[str] = (), stop_at: float | None = None, log=None,
          stop_window: int = 5, on_step=None) -> tuple[list[dict], list[dict]]:
    """Run ``steps`` GRPO steps (fewer once the mean reward of the last ``stop_window`` steps
    reaches ``stop_at``); the per-step metrics and episode stats (episodes, prefix breaks,
    failed runs).  ``on_step(history)`` after every step (the CLI writes its curve there, so a
    run cut short still leaves one)."""
    t = trainer(overrides)
    history: list[dict[str, Any]] = []
    try:
        for _ in range(steps):
            history.append(t.train_step())
            if on_step is not None:
                on_step(history)
            if log is not None:
                h = history[-1]
                log(f"step {h['step']}: reward {h['reward/mean']:.3f}  "
                    f"{h['time/step_s']:.1f} s  {t.episode_stats[-1]}")
            tail = [h["reward/mean"] for h in history[-stop_window:]]
            if stop_at is not None and len(tail) == stop_window and \
                    sum(tail) / stop_window >= stop_at:
                break
    finally:
        t.logger.close()
        t.close()
    return history, t.episode_stats


def main(argv: list[str] | None = None) -> int:
    from tir_envs.trainers.grpo.curve import save_curve

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--out", default="runs/agents-math", help="folder for the curve JSON + SVG")
    p.add_argument("overrides", nargs="*", help="config overrides, e.g. optim.lr=1e-3")
    args = p.parse_args(argv)
    t0 = time.perf_counter()

    def curve(history: list[dict[str, Any]]) -> dict[str, Path]:
        return save_curve(history, args.out, name="agents_math_curve",
                          title="Agents SDK agent through the gateway: mean reward",
                          label="GRPO, tiny Qwen2")
    history, stats = train(args.steps, [f"train.output_dir={args.out}/run", *args.overrides],
                           log=lambda s: print(s, file=sys.stderr, flush=True), on_step=curve)
    paths = curve(history)
    summary = {"steps": len(history), "wall_s": round(time.perf_counter() - t0, 1),
               "first_5_mean": sum(h["reward/mean"] for h in history[:5]) / 5,
               "last_5_mean": sum(h["reward/mean"] for h in history[-5:]) / 5,
               "episodes": sum(s["episodes"] for s in stats),
               "breaks": sum(s["breaks"] for s in stats),
               "failed": sum(s["failed"] for s in stats),
               "curve": {k: str(v) for k, v in paths.items()}}
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
