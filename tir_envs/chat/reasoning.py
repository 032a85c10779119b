"""Reasoning: one rule per family, the one its serving stack applies, used everywhere.

A family's rule says which part of a sampled turn is reasoning and which is content.  The env's
bridge (whether to close an open block), the call parser (calls are read from content only),
the grader (answers are read from content only) and a chat gateway (``split_reasoning``: the
``reasoning`` / ``content`` / calls of a completion) all ask the same rule, so a call or an
answer is either run and graded everywhere or nowhere.  The rules follow vLLM's reasoning
parser for each family (``Reasoning.parser``):

* ``<think>`` tags (Qwen3, GLM-4.5, DeepSeek R1): reasoning runs from the first opener (or from
  the start of the turn when the prompt prefilled the opener) to the close.  Text before the
  first opener, which vLLM drops (neither reasoning nor content), is content here: it stays
  visible to format rewards, as it always was.  A turn holding more than one close (``<think>a <think>b</think>X</think>
  Done.``): vLLM's parsers end at the first and return ``X</think>Done.`` as content, stray
  marker and all; the families' chat templates end at the last (``content.split('</think>')
  [-1]``).  The rule ends at the last: text the model itself marked as reasoning is never run
  or graded (``X`` is not an answer).
* A turn the policy ended itself (its end-of-turn id) with a block opened and never closed:
  vLLM's Qwen3 and GLM-4.5 parsers return the whole turn as content (``unclosed="content"``),
  so its calls run and its answer counts; DeepSeek R1's, whose opener the prompt prefills,
  returns it as reasoning (``unclosed="reasoning"``).  A turn cut by the token budget or a stop
  string is closed by the env (the family's close as env tokens, loss mask 0), so its open
  block is reasoning in every family.
* Harmony (gpt-oss, ``HarmonyReasoning``): the ``analysis`` channel is reasoning, ``final`` is
  content, ``commentary`` carries the calls (``to=functions.NAME``); reasoning is never graded.

``blank_reasoning`` gives the action as protocols read it: reasoning replaced by spaces
(newlines kept), so offsets stay valid and the markers stay visible to format rewards.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

Span = tuple[int, int]


class ReasoningSplit(NamedTuple):
    """A completion read by its family's rule: ``reasoning`` (``None``: none) and ``content``
    (what a chat API returns as the message), and the reasoning spans in the text."""

    reasoning: str | None
    content: str
    spans: list[Span]


def _blank(text: str) -> str:
    return "".join(c if c == "\n" else " " for c in text)


@dataclass(frozen=True)
class Reasoning:
    """A family's reasoning block in ``<think>``-style tags, and its rule (module docstring).

    ``unclosed``: what a turn the policy ended with an open block and no close is, in the
    family's serving parser (``"content"`` or ``"reasoning"``); ``parser``: that parser."""

    open: str
    close: str
    unclosed: str = "content"
    parser: str = ""

    def spans(self, text: str, starts_inside: bool = False, ended: bool = True) -> list[Span]:
        """The reasoning spans of ``text`` (markers excluded). ``starts_inside``: the prompt
        opened the block (a prefilled opener); ``ended``: the policy ended the turn itself
        (else the env closes an open block, which makes it reasoning)."""
        first = 0 if starts_inside else text.find(self.open)
        last_close = text.rfind(self.close)
        if first < 0:  # no opener: a close alone still ends reasoning begun at the start
            return [(0, last_close)] if last_close > 0 else []
        body = first if starts_inside else first + len(self.open)
        if last_close >= body:
            return [(body, last_close)]
        if ended and self.unclosed == "content":
            return []  # the whole turn is content, as served
        return [(body, len(text))]

    def split(self, text: str, starts_inside: bool = False, ended: bool = True) -> ReasoningSplit:
        spans = self.spans(text, starts_inside, ended)
        if not spans:
            return ReasoningSplit(None, text, [])
        start, end = spans[-1]
        lead = text[:max(start - len(self.open), 0)] if not starts_inside else ""
        content = lead + (text[end + len(self.close):] if end < len(text) else "")
        return ReasoningSplit(text[start:end], content, spans)

    def blank(self, text: str, starts_inside: bool = False, ended: bool = True) -> str:
        out, pos = [], 0
        for start, end in self.spans(text, starts_inside, ended):
            out += [text[pos:start], _blank(text[start:end])]
            pos = end
        return "".join(out) + text[pos:]

    def ends_inside(self, text: str, starts_inside: bool = False) -> bool:
        """Whether ``text`` leaves a block open (the env closes it when the turn was cut)."""
        last_open, last_close = text.rfind(self.open), text.rfind(self.close)
        if last_open < 0 and last_close < 0:
            return starts_inside
        return last_open > last_close


#: a harmony message: header (role, channel, recipient, constraint), ``<|message|>``, body, end
_HARMONY = re.compile(
    r"(?:<\|start\|>(?P<role>[^<]*?))?(?P<head>(?:<\|channel\|>[^<]*|[^<]*)?)"
    r"(?:<\|constrain\|>[^<]*)?<\|message\|>(?P<body>.*?)"
    r"(?P<end><\|end\|>|<\|call\|>|<\|return\|>|(?=<\|start\|>)|\Z)", re.S)


class HarmonyMessage(NamedTuple):
    channel: str
    recipient: str | None
    body: str
    body_at: int
    start: int
    end: int
    closed: bool


def harmony_messages(text: str) -> list[HarmonyMessage]:
    """The assistant messages of a harmony completion (the generation prompt already wrote
    the first ``<|start|>assistant``)."""
    out = []
    for m in _HARMONY.finditer(text):
        head = f"{m.group('role') or ''} {m.group('head') or ''}"
        channel = re.search(r"<\|channel\|>\s*(\w+)", head)
        recipient = re.search(r"to=(\S+?)(?=\s|<|$)", head)
        out.append(HarmonyMessage(channel.group(1) if channel else "", recipient and
                                  recipient.group(1), m.group("body"), m.start("body"),
                                  m.start(), m.end(), bool(m.group("end"))))
    return out


@dataclass(frozen=True)
class HarmonyReasoning(Reasoning):
    """gpt-oss: the ``analysis`` channel is reasoning (vLLM's ``openai_gptoss`` parser);
    ``final`` is content.  ``open``/``close`` are an analysis message's markers (the audit's
    probes write a block with them)."""

    open: str = "<|channel|>analysis<|message|>"
    close: str = "<|end|>"
    unclosed: str = "reasoning"
    parser: str = "openai_gptoss"

    def spans(self, text: str, starts_inside: bool = False, ended: bool = True) -> list[Span]:
        return [(m.body_at, m.body_at + len(m.body)) for m in harmony_messages(text)
                if m.channel == "analysis" and not m.recipient]

    def split(self, text: str, starts_inside: bool = False, ended: bool = True) -> ReasoningSplit:
        msgs = harmony_messages(text)
        thought = [m.body for m in msgs if m.channel == "analysis" and not m.recipient]
        final = [m.body for m in msgs if m.channel == "final"]
        return ReasoningSplit("".join(thought) or None, "".join(final),
                              self.spans(text, starts_inside, ended))

    def ends_inside(self, text: str, starts_inside: bool = False) -> bool:
        return False  # a cut message is closed by the bridge's <|end|>, whatever its channel


def blank_reasoning(text: str, reasoning: Reasoning, starts_inside: bool = False,
                    ended: bool = True) -> str:
    """``text`` with its reasoning blanked by the family's rule (see the module docstring)."""
    return reasoning.blank(text, starts_inside, ended)


def split_reasoning(text: str, reasoning: Reasoning | None, starts_inside: bool = False,
                    ended: bool = True) -> ReasoningSplit:
    """``(reasoning, content, spans)`` of a completion's text by the family's rule (``None``:
    a family without reasoning: all content).  What a chat gateway returns as the message's
    ``reasoning_content`` and ``content``; calls are parsed from the content."""
    if reasoning is None:
        return ReasoningSplit(None, text, [])
    return reasoning.split(text, starts_inside, ended)


class Completion(NamedTuple):
    """A completion as a chat API returns it: ``reasoning`` (``None``: none), ``content`` (the
    text less reasoning and call text) and ``calls`` (the family's parsed calls, each with its
    span in the original text)."""

    reasoning: str | None
    content: str
    calls: list


def read_completion(renderer: object, text: str, starts_inside: bool = False,
                    ended: bool = True) -> Completion:
    """``text`` (a sampled turn, decoded) read by ``renderer``'s family rule: the split a
    gateway returns.  Calls are parsed from the text with reasoning blanked, exactly as the
    env parses them, so a call the env would not run is no call here either."""
    rule = getattr(renderer, "reasoning", None)
    split = split_reasoning(text, rule, starts_inside, ended)
    if not getattr(renderer, "renders_tools", False):
        return Completion(split.reasoning, split.content, [])
    visible = blank_reasoning(text, rule, starts_inside, ended) if rule else text
    calls = list(renderer.parse_calls(visible))  # type: ignore[attr-defined]
    content = split.content
    for call in calls:
        if call.raw:
            content = content.replace(call.raw, "", 1)
    return Completion(split.reasoning, content, calls)


def ends_inside(text: str, reasoning: Reasoning, starts_inside: bool = False) -> bool:
    """Whether ``text`` leaves a reasoning block open (then the next tokens continue it)."""
    return reasoning.ends_inside(text, starts_inside)
