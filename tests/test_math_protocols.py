"""The math protocols' pieces on their own: templates, call parsing, output rendering, RITE's
format reward.  (Whole episodes with the real sandbox are in test_mathcode_env.py.)"""

from __future__ import annotations

import pytest

from tir_envs.codec import Codec
from tir_envs.formats.json_calls import JsonFormat
from tir_envs.formats.markdown import LastBlockFormat
from tir_envs.protocols import EpisodeState, math_protocol
from tir_envs.protocols.torl import TORL_EMPTY_OUTPUT, TORL_TEMPLATE, torl_output_text
from tir_envs.protocols.zerotir import ZEROTIR_TEMPLATE, ZeroTIRProtocol, opens_block
from tir_envs.protocols.interleave import interleaved_format_score
from tir_envs.task import Task


def test_protocol_names():
    assert [math_protocol(n).name for n in ("torl", "ToRL", "zero-tir", "ZeroTIR", "rite")] == \
        ["torl", "torl", "zerotir", "zerotir", "rite"]
    with pytest.raises(ValueError, match="unknown math protocol 'tora'.*rite.*torl.*zerotir"):
        math_protocol("tora")


def test_templates_are_the_papers():
    torl = TORL_TEMPLATE.format(question="Q?")
    assert torl.startswith("A conversation between User and Assistant. The user asks a question")
    assert "put your final answer within \\boxed{}.\nQ?\nAssistant:\n" in torl
    zero = ZEROTIR_TEMPLATE.format(question="Q?")
    assert "You can use python-code to solve your problem." in zero
    assert zero.endswith("by the \\boxed{} tag.\nThis is the problem:Q?\nAssistant: <think>")


@pytest.mark.parametrize("text, shown", [
    ("42\n", "42"),
    ("Traceback (most recent call last):\n  File x\nZeroDivisionError: division by zero\n",
     "ZeroDivisionError: division by zero"),
    ("", TORL_EMPTY_OUTPUT),
    ("  \n", TORL_EMPTY_OUTPUT),
])
def test_torl_output_text(text, shown):
    assert torl_output_text(text) == shown


def test_torl_long_output_is_cut_to_head_and_tail():
    text = "".join(str(i % 10) for i in range(1000))
    shown = torl_output_text(text)
    assert shown == text[:128] + "..." + text[-128:] and len(shown) == 259


def test_torl_runs_only_the_last_complete_block():
    fmt = LastBlockFormat(stop=["```output"])
    two = "```python\nx = 1\n```\nthen\n```python\nprint(x)\n```\n```output"
    (call,) = fmt.parse(two)
    assert call.arguments == {"code": "print(x)"}
    assert fmt.parse("```python\nx = 1\n```\n```python\nprint(x\n") == []  # last unterminated
    # Code the policy writes after ```output (a hallucinated output) is not a call.
    assert fmt.parse("```output\n```python\nprint(1)\n```") == []


def zerotir_parse(history: list[str]):
    """ZeroTIR's parse of the last action, the earlier ones already recorded."""
    state = EpisodeState(task=Task("0", "q"), codec=None, max_turns=43, tool_budgets={},
                         obs_token_budget=512, actions=history[:-1])
    return ZeroTIRProtocol().parse(history[-1], state)


def test_zerotir_block_split_over_two_actions():
    history = ["I will compute.\n```python", "\nprint(6 * 7)\n```"]
    assert opens_block(history[0])
    (call,) = zerotir_parse(history)
    assert call.arguments == {"code": "print(6 * 7)"}
    assert (call.start, call.end) == (0, len(history[1]))


def test_zerotir_call_must_end_the_action():
    # a whole block in one action also runs
    assert len(zerotir_parse(["```python\nprint(1)\n```"])) == 1
    assert zerotir_parse(["```python\nprint(1)\n```\nso the answer is 1"]) == []
    # no open fence before: not a call
    assert zerotir_parse(["no code at all", "\nprint(1)\n```"]) == []


JSON = JsonFormat()
PY = '<tool_call>\n{"name": "python", "arguments": {"code": "print(1)"}}\n</tool_call>'
ANS = '<tool_call>\n{"name": "answer", "arguments": {"answer": "\\\\boxed{1}"}}\n</tool_call>'


@pytest.mark.parametrize("actions, score, issue", [
    ([f"<think>plan</think>\n{PY}", f"<think>reflect</think>\n{ANS}"], 1.0, None),
    ([f"<think>plan</think>\n{PY}", f"<think>done</think>\n{ANS}<|im_end|>"], 1.0, None),
    ([f"{PY}", f"<think>done</think>\n{ANS}"], 0.0, "does not open with <think>"),
    ([f"<think>a</think>\n{PY}\n{PY}", f"<think>b</think>\n{ANS}"], 0.0, "2 tool calls"),
    ([f"<think>a</think>\nchatter\n{PY}", f"<think>b</think>\n{ANS}"], 0.0, "text outside"),
    ([f"<think>a {PY}</think>", f"<think>b</think>\n{ANS}"], 0.0, "inside the thinking"),
    ([f"<think>plan</think>\n{PY}", "<think>done</think> the answer is \\boxed{1}"], -1.0,
     "did not end with a call to the answer tool"),
    (["<think>plan</think>\n<tool_call>{not json}</tool_call>", f"<think>b</think>\n{ANS}"],
     -1.0, "malformed tool call"),
    ([f"<think>plan\n{PY}", f"<think>b</think>\n{ANS}"], -1.0, "unbalanced <think>"),
])
def test_interleaved_format_score(actions, score, issue):
    got, issues = interleaved_format_score(actions, JSON, "answer", eos_text="<|im_end|>")
    assert got == score
    if issue is None:
        assert issues == []
    else:
        assert any(issue in i for i in issues), issues
