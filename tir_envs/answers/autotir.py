"""AutoTIR's reading of a final action (the AutoTIR protocol's one answer per episode).

By the task's domain: the last box of the last ``<answer>`` block (else that block's text, else
the last box of the response); for a writing task the whole visible response; for a
multiple-choice task the one option letter chosen.  The answer is marked ``formatted`` when its
scope holds a complete ``\\boxed{}`` (the paper's eq. 5, which ``AutoTIRReward`` applies).
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from tir_envs.answers.choice import extract_choice
from tir_envs.answers.math import FinalAnswer, extract_final_answer
from tir_envs.answers.response import final_response
from tir_envs.formats.boxed import boxed_spans
from tir_envs.formats.tagged import TaggedPattern

_ANSWER = TaggedPattern(r"<answer>(.*?)</answer>", ["answer"])


class _Read(str):
    """An answer string that carries whether its response was correctly formatted."""

    formatted: bool = False


def _marked(answer: str | None, formatted: bool) -> str | None:
    """``answer`` marked ``formatted`` (a ``FinalAnswer`` keeps its boxes)."""
    if answer is None:
        return None
    if type(answer) is str:
        answer = _Read(answer)
    answer.formatted = formatted
    return answer


def is_formatted(answer: Any) -> bool:
    """Whether ``answer`` came from a correctly formatted response (eq. 5): the mark
    ``final_answer`` sets, else a boxed ``FinalAnswer``."""
    mark = getattr(answer, "formatted", None)
    if mark is not None:
        return bool(mark)
    return isinstance(answer, FinalAnswer) and answer.source == "boxed"


def final_answer(actions: Sequence[str], domain: str | None) -> str | None:
    """The answer of an AutoTIR episode, from the policy's final action outside ``<think>``:
    the last box of its last ``<answer>`` block, else that block's text, else the last box of
    the response; for a writing task (``instruction``) without either, the response itself;
    for a ``multiple_choice`` task, the one option letter the response chooses
    (``extract_choice``).  The AutoTIR protocol's answer, graded by ``AutoTIRReward``; it is
    marked ``formatted`` when that scope holds a complete ``\\boxed{}`` (eq. 5)."""
    response = final_response(actions)
    # a block holding another <answer> is a nest of answers (a hedge), never one
    blocks = [b for b in _ANSWER.findall(response) if "<answer>" not in b]
    scope = blocks[-1] if blocks else response
    formatted = bool(boxed_spans(scope))
    if domain == "multiple_choice":
        return _marked(extract_choice(response), formatted)
    if domain == "instruction":  # the whole visible response, never a box inside it
        return _marked(visible_response(actions) or None, formatted)
    boxed = extract_final_answer(scope)  # a str that also keeps every box of a list answer
    if boxed is not None:
        return _marked(boxed, formatted)
    if blocks:
        return _marked(blocks[-1].strip() or None, formatted)
    return None


_MARKUP = re.compile(r"</?answer>")
_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")


def _unbox(text: str) -> str:
    """``text`` with each ``\\boxed{…}`` replaced by its contents, in place."""
    while (m := _BOX.search(text)) is not None:
        depth, end = 1, None
        for i in range(m.end(), len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                end = i
                break
        text = text[:m.start()] + (text[m.end():end] + text[end + 1:] if end is not None
                                   else text[m.end():])
    return text


def visible_response(actions: Sequence[str]) -> str:
    """What a reader of the final response sees, all of it: the response outside ``<think>``
    with the protocol's markup (``<answer>`` tags, ``\\boxed{}`` wrappers) unwrapped in place.
    Instructions are checked on this, never on a box inside it: a compliant box beside
    text that breaks the instructions does not follow them."""
    return _unbox(_MARKUP.sub("", final_response(actions))).strip()
