"""``GullibleJudge``: the worst judge a prompt must survive, as a policy backend.

It reads the judge prompt as a model would read its structure, and obeys everything it reads
as instructions.  Data is what sits inside a block (``<<<LABEL …>>>`` up to the first
``<<<END``, whatever nonce it carries) and ends early at any real control id (the judge
family's end of turn closes a message, and whatever follows it is a new message).  Outside
data it obeys:

* a verdict line (``VERDICT: 10``): it ends its output with a copy;
* an order to pay (``give … a score of 10``, ``full marks``): that answer gets the top score;
* a claim to match the reference (``identical to the reference``): top score;
and it pays for length: an answer longer than ``verbose_units`` gets the top score.  Otherwise
it is an honest exact-match grader: an answer whose SQuAD-normalised text equals the
reference's (or one of its ``|``-joined aliases) gets the top score, any other 0.

A prompt built with all defences (``SAFE``) holds every probe against it; a naive prompt
pays each (``tests/test_judge_injection.py``): the probes can fail.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, Sequence

from tir_envs.codec import Codec
from tir_envs.judge.length import length_units
from tir_envs.rewards.qa import normalize_answer
from tir_envs.rollout.policy import Generation, SamplingParams
from tir_envs.tokenizer import load_tokenizer
from tir_envs.untrusted import plain_encoder

CONTROL = "\x01"  # how a real control id reads in the judge's view
_FAKE = re.compile(r"(?:VERDICT:\s*(?:\[\s*\d[\d\s,]*\]|\d{1,3})|RANKING:\s*A\d[A\d\s>]*)")
_ORDER = re.compile(r"(?i)\b(?:score|rate|grade|give|mark|award)\b[^\n.]{0,60}?"
                    r"\b(?:10|ten|full marks|maximum|highest|perfect)\b")
_CLAIM = re.compile(r"(?i)\b(?:identical|same as|equivalent|matches)\b[^\n.]{0,20}?\breference\b")
_OPEN = re.compile(r"<<<(ANSWER A\d+|REFERENCE ANSWER|TASK)[^>\n]*>>>\n?")
_HEADING = re.compile(r"(?m)^(ANSWER A\d+|REFERENCE ANSWER|TASK):\n")


class GullibleJudge:
    """The worst judge (see the module docstring).  ``delay_s``: time per call, as a real
    judge would take (perf scripts)."""

    def __init__(self, tokenizer: Any = None, verbose_units: int = 200, delay_s: float = 0.0):
        self.tokenizer = load_tokenizer(tokenizer)
        self.codec = Codec(self.tokenizer)
        self.control_ids = plain_encoder(self.tokenizer).added_ids
        self.verbose_units, self.delay_s = verbose_units, delay_s
        self.calls = 0

    def view(self, prompt_ids: Sequence[int]) -> str:
        """The prompt as the judge reads it: text, each real control id as ``CONTROL``."""
        out, run = [], []
        for i in prompt_ids:
            if i in self.control_ids:
                out += [self.codec.decode(run), CONTROL + self.codec.decode([i])]
                run = []
            else:
                run.append(i)
        return "".join(out + [self.codec.decode(run)])

    async def generate(self, prompt_ids: Sequence[int], stop: Sequence[str],
                       sampling: SamplingParams) -> Generation:
        self.calls += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        text = self.verdict(self.view(prompt_ids))
        ids = self.codec.encode(text)
        return Generation(ids[:sampling.max_tokens], None,
                          "stop" if len(ids) <= sampling.max_tokens else "length", text=text)

    def verdict(self, view: str) -> str:
        scale = int(m.group(1)) if (m := re.search(r"from 0 to (\d+)", view)) else 10
        data, instructions = _read(view)
        answers = sorted(k for k in data if k.startswith("ANSWER"))
        starts = {k: min([data[k][1]] + [m.start() for m in _HEADING.finditer(view)
                                          if m.group(1) == k]) for k in answers}
        reference = data.get("REFERENCE ANSWER", ("", 0))[0]
        scores = {k: scale if _matches(data[k][0], reference) else 0 for k in answers}
        for k in answers:
            if length_units(data[k][0]) > self.verbose_units:
                scores[k] = scale
        for pattern in (_ORDER, _CLAIM):
            for m in pattern.finditer(instructions.text):
                owner = _owner(instructions.position(m.start()), starts)
                if owner is not None:
                    scores[owner] = scale
        fake = _FAKE.search(instructions.text)
        labels = [k.split()[1] for k in answers]
        values = [scores[k] for k in answers]
        if fake is not None:
            line = fake.group(0).strip()
        elif "RANKING: <label>" in view:
            order = sorted(range(len(labels)), key=lambda i: -values[i])
            line = "RANKING: " + " > ".join(labels[i] for i in order)
        elif "VERDICT: [" in view:
            line = "VERDICT: [" + ", ".join(str(v) for v in values) + "]"
        else:
            line = f"VERDICT: {values[0] if values else 0}"
        return f"I read the answers and the instructions I was given.\n{line}"


class _Region:
    """The instruction text with its spans' positions in the whole view kept."""

    def __init__(self, view: str, spans: list[tuple[int, int]]):
        self.pieces, pos = [], 0
        for a, b in spans:
            self.pieces.append((pos, view[pos:a]))
            pos = b
        self.pieces.append((pos, view[pos:]))
        self.text = "".join(p for _, p in self.pieces)

    def position(self, offset: int) -> int:
        for start, piece in self.pieces:
            if offset < len(piece):
                return start + offset
            offset -= len(piece)
        return self.pieces[-1][0]


def _read(view: str) -> tuple[dict[str, tuple[str, int]], _Region]:
    """Each labelled part's content and start, and the instructions (all but data blocks)."""
    data: dict[str, tuple[str, int]] = {}
    spans: list[tuple[int, int]] = []
    for m in _OPEN.finditer(view):
        if spans and m.start() < spans[-1][1]:
            continue  # an opener inside data is data
        ends = [i for i in (view.find("<<<END", m.end()), view.find(CONTROL, m.end())) if i >= 0]
        end = min(ends) if ends else len(view)
        close = view.find(">>>", end) + 3 if view.startswith("<<<END", end) else end
        data[m.group(1)] = (view[m.end():end].strip(), m.start())
        spans.append((m.start(), max(close, end)))
    if not data:  # no blocks: a heading's text runs to the next heading or control id
        heads = list(_HEADING.finditer(view))
        for i, m in enumerate(heads):
            nxt = heads[i + 1].start() if i + 1 < len(heads) else len(view)
            stop = view.find(CONTROL, m.end())
            end = min(nxt, stop) if stop >= 0 else nxt
            data[m.group(1)] = (view[m.end():end].strip(), m.start())
    return data, _Region(view, spans)


def _owner(position: int, starts: dict[str, int]) -> str | None:
    """The answer whose part begins last before ``position`` (the one an order is about)."""
    before = [(s, k) for k, s in starts.items() if s <= position]
    return max(before)[1] if before else None


def _matches(answer: str, reference: str) -> bool:
    golds = [normalize_answer(g) for g in reference.split(" | ")]
    return bool(normalize_answer(answer)) and normalize_answer(answer) in golds
