"""A toy tool task a tiny random model can learn on CPU in a minute: proof the trainer learns.

The prompt is always the same (``?``).  Each task hides a secret digit.  Writing ``<call>`` (one
token, the whole tool call) makes the env answer ``<result>d</result>`` with the secret; the
reward is 1 when the first digit of the policy's final action is the secret.  The prompt never
reveals it, so without the tool nothing beats chance (1 / ``num_values``); with it, the policy
must learn to call and then copy the digit it was shown.

Built on the real ``TIREnv`` ledger, budgets and sessions, with a word-level tokenizer of
a dozen tokens (``toy_tokenizer``) so a random policy finds the call often enough to learn.
"""

from __future__ import annotations

import functools
import random
import re
from typing import Any, Sequence

from tir_envs.env import TIREnv
from tir_envs.formats.base import ToolCall, ToolCallFormat
from tir_envs.protocols.base import EpisodeState, Protocol
from tir_envs.rewards.base import RewardResult
from tir_envs.task import Task
from tir_envs.tools.base import Tool, ToolResult, Status
from tir_envs.trajectory import Trajectory

CALL, RESULT_OPEN, PROMPT, UNKNOWN = "<call>", "<result>", "?", "<unk>"
SPECIAL = ["<|endoftext|>", "<|im_end|>", UNKNOWN]
WORDS = [PROMPT, CALL, RESULT_OPEN, *(str(d) for d in range(10))]


@functools.lru_cache(maxsize=1)
def toy_tokenizer():
    """Word-level tokenizer over the toy task's 16 tokens; decode concatenates them exactly."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(SPECIAL + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=UNKNOWN))
    pattern = "|".join(re.escape(w) for w in sorted(WORDS, key=len, reverse=True))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", clean_up_tokenization_spaces=False)


def toy_tasks(n: int = 64, num_values: int = 4, seed: int = 0) -> list[Task]:
    """``n`` tasks whose secrets cover the first ``num_values`` digits equally (shuffled), so no
    fixed guess beats chance."""
    if not 2 <= num_values <= 10:
        raise ValueError(f"num_values must be in 2..10, got {num_values}")
    secrets = [str(i % num_values) for i in range(n)]
    random.Random(seed).shuffle(secrets)
    return [Task(id=f"toy-{i}", question=PROMPT, answer=s) for i, s in enumerate(secrets)]


class CallTokenFormat(ToolCallFormat):
    """A tool call is the fixed string ``<call>``; its result is ``<result>…</result>``."""

    name = "call-token"
    result_opener = RESULT_OPEN

    def __init__(self, tool: str = "lookup"):
        self.tool = tool

    @property
    def stop_sequences(self) -> list[str]:
        return [CALL]

    def parse(self, text: str) -> list[ToolCall]:
        at = self.visible(text).find(CALL)
        return [] if at < 0 else [ToolCall(self.tool, {}, CALL, at, at + len(CALL))]

    def render_result(self, call: ToolCall, text: str) -> str:
        return f"{RESULT_OPEN}{text}"


class ToyProtocol(Protocol):
    """Raw text over ``CallTokenFormat``; the answer is the first digit of the final action
    before any call (``render_answer`` writes a digit alone, for the oracle)."""

    name = "toy"
    chat = False

    def __init__(self) -> None:
        super().__init__(CallTokenFormat())

    def render_answer(self, text: str) -> str:
        return text

    def answer(self, state: EpisodeState) -> str | None:
        final = state.actions[-1] if state.actions else ""
        digit = re.search(r"\d", final.split(CALL)[0])
        return None if digit is None else digit.group(0)


def secret_reward(task: Task, trajectory: Trajectory | None, answer: str | None) -> RewardResult:
    """1 when the digit the protocol read is the task's secret."""
    correct = answer is not None and answer == str(task.answer)
    return RewardResult(float(correct), {"correct": float(correct)}, correct=correct,
                        answered=answer is not None)


class SecretTool(Tool):
    """Reveals the episode's secret (its session holds the task's answer); disabled, it answers
    with nothing."""

    name = "lookup"

    def __init__(self, enabled: bool = True):
        self.enabled = enabled

    async def open_session(self, task: Task | None = None) -> str:
        return "" if task is None else str(task.answer)

    async def call(self, arguments: dict[str, Any], session: Any = None) -> ToolResult:
        if not self.enabled:
            return ToolResult("", Status.ERROR, metadata={"disabled": True})
        return ToolResult(session or "")


class ToyToolEnv(TIREnv):
    """The toy tool task (see the module docstring).  ``tool_enabled=False`` is the control;
    ``reward=`` grades the digit read (default: the secret's check; a judge in the judge tests).
    ``reward=`` (e.g. a ``JudgeReward``) grades the digit the toy reads instead of its own
    check."""

    env_id = "tir/Toy-v0"

    def __init__(self, tasks: Sequence[Any] | None = None, tool_enabled: bool = True,
                 num_values: int = 4, max_turns: int = 2, reward: Any = secret_reward,
                 **kwargs: Any):
        kwargs["tokenizer"] = kwargs.get("tokenizer") or toy_tokenizer()
        super().__init__(tasks=tasks if tasks is not None else toy_tasks(num_values=num_values),
                         protocol=ToyProtocol(), tools=[SecretTool(tool_enabled)],
                         reward=reward, max_turns=max_turns,
                         max_total_tokens=kwargs.pop("max_total_tokens", 64), **kwargs)
        unknown = [w for w in WORDS if len(self.codec.encode(w)) != 1]
        if unknown:
            raise ValueError(f"the tokenizer must encode each of {unknown} as one token; use "
                             "tir_envs.trainers.grpo.toy_env.toy_tokenizer()")
