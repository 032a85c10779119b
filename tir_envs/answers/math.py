"""The math final answer a policy wrote: its boxes, or (``fallback``) an unboxed final answer.

* ``extract_final_answer(text, fallback=False)``: the policy's answer as a ``FinalAnswer``: the
  last box, plus the boxes that form the final answer with it (``\\boxed{-2}`` and
  ``\\boxed{1}``); with ``fallback`` also "final answer is ..." and the last ``$...$``.

The reading the math protocols (ToRL, ZeroTIR, RITE, AutoTIR) own; the grader
(``tir_envs.rewards.math``) only checks what this read.  The caller passes only text the policy
generated: an answer printed by a tool is never an answer the policy gave.
"""

from __future__ import annotations

import re

from tir_envs.formats.boxed import BoxUnwrapper, find_boxes, last_boxed_answer, top_level_boxes

# ---------------------------------------------------------------------------- final answer
class FinalAnswer(str):
    """The policy's final answer: the text is the last box (what a single-valued gold is graded
    against); ``boxes`` are all the boxes that form the final answer (graded as a set against a
    list/set gold, see ``graded_text``); ``source`` says where it was found."""

    boxes: tuple[str, ...]
    source: str

    def __new__(cls, text: str, boxes: tuple[str, ...] = (), source: str = "boxed"):
        obj = super().__new__(cls, text)
        obj.boxes = tuple(boxes) or (str(text),)
        obj.source = source
        return obj

    def __reduce__(self):
        return FinalAnswer, (str(self), self.boxes, self.source)


# Text that may sit between the boxes of one answer: "$\boxed{-2}$ and $\boxed{1}$",
# "\boxed{-2} \quad\text{or}\quad \boxed{1}", "x = \boxed{1}, y = \boxed{2}".
_GLUE = re.compile(
    r"(?:\s|\$|\\[,;:! ]|\\q?quad|\\(?:text|mathrm|textbf)\{\s*(?:and|or|,)?\s*\}|\band\b"
    r"|\bor\b|[,;&.]|\\\\|\\[\[\]()]|[A-Za-z](?:_\{?\w+\}?)?\s*=)*", re.IGNORECASE)
_MAX_GLUE = 80


def final_boxes(text: str) -> list[str]:
    """The boxes that form the final answer: the last box, and each box before it that is
    separated from the next only by connectives (``and``, ``or``, commas, ``\\quad``, ``$``,
    ``x =``; at most 80 characters).  A box further back, after other text, is working."""
    boxes = find_boxes(text)
    top = top_level_boxes(boxes)
    if not top:
        return []
    group = [top[-1]]
    for box in reversed(top[:-1]):
        gap = text[box[1]:group[-1][0]]
        if len(gap) > _MAX_GLUE or not _GLUE.fullmatch(gap):
            break
        group.append(box)
    unwrap = BoxUnwrapper(text, boxes)
    return [content for content in (unwrap(b) for b in reversed(group)) if content]


_FINAL_IS = re.compile(r"final answer\s*(?:is|:)\s*:?\s*", re.IGNORECASE)
# Display math may span lines; inline math ($...$, \(...\)) may not.  "\$" inside is a dollar.
_MATH = re.compile(r"\$\$(.+?)\$\$|(?<!\\)\$((?:[^$\\\n]|\\[^\n])+?)\$|\\\(([^\n]+?)\\\)"
                   r"|\\\[(.+?)\\\]", re.DOTALL)
_TAIL_CHARS = 4000
_SENTENCE_END = re.compile(r"[.!?](?=\s)|\n")
_IS = re.compile(r"\s(?:is|are|equals)\s", re.IGNORECASE)


def _math_content(m: re.Match) -> str:
    return next(g for g in m.groups() if g is not None).strip()


def _after_final_answer_is(text: str) -> str | None:
    """What follows the last "final answer is": a math span, else the rest of the sentence."""
    hits = list(_FINAL_IS.finditer(text))
    if not hits:
        return None
    rest = text[hits[-1].end():]
    m = _MATH.match(rest)
    if m:
        return _math_content(m) or None
    end = _SENTENCE_END.search(rest)
    answer = (rest[:end.start()] if end else rest).strip()
    verbs = list(_IS.finditer(answer))  # "Final Answer: The largest $n$ is 34."
    if verbs:
        answer = answer[verbs[-1].end():].strip()
        m = _MATH.match(answer)
        if m:
            return _math_content(m) or None
    if "\\boxed" in answer or "\\fbox" in answer:
        return None  # a box the policy never closed is no answer, in any extraction
    return answer.rstrip(".").strip() or None


def _last_math_of_last_sentence(text: str) -> list[str]:
    """The last ``$...$`` (or ``\\(...\\)``, ``\\[...\\]``) of the text's last sentence, with
    the spans before it joined to it by connectives only (``$1$ and $2$``).  Only the text's
    tail is searched (an unclosed ``\\[`` costs a scan to the end; many would cost many)."""
    text = text[-_TAIL_CHARS:]
    spans = list(_MATH.finditer(text))
    if not spans:
        return []
    masked = list(text)  # sentence ends inside math ("$3.5$") do not end a sentence
    for m in spans:
        masked[m.start():m.end()] = "x" * (m.end() - m.start())
    body = "".join(masked).rstrip().rstrip(".!?")
    ends = list(_SENTENCE_END.finditer(body))
    start = ends[-1].end() if ends else 0
    inside = [m for m in spans if m.start() >= start]
    if not inside:
        return []
    group = [inside[-1]]
    for m in reversed(inside[:-1]):
        gap = text[m.end():group[0].start()]
        if len(gap) > _MAX_GLUE or not _GLUE.fullmatch(gap):
            break
        group.insert(0, m)
    return [c for c in (_math_content(m) for m in group) if c]


def extract_final_answer(text: str | None, fallback: bool = False) -> FinalAnswer | None:
    """The final answer in the policy's ``text``: its boxed answer (see ``final_boxes``).

    ``fallback=True`` (for evaluation suites that ask for it; off in the RL recipes) also reads
    responses without a box: the last "final answer is ..." (its math span, else the rest of
    that sentence), else the last ``$...$`` in the last sentence.  ``None`` when none is found.
    """
    if not text:
        return None
    boxes = final_boxes(text)
    last = last_boxed_answer(text)
    if last:
        if not boxes or boxes[-1] != last:  # the last box to close is nested oddly: use it alone
            boxes = [last]
        return FinalAnswer(last, tuple(boxes), "boxed")
    if not fallback:
        return None
    answer = _after_final_answer_is(text)
    if answer:
        return FinalAnswer(answer, (answer,), "final answer is")
    spans = _last_math_of_last_sentence(text)
    if spans:
        return FinalAnswer(spans[-1], tuple(spans), "last math")
    return None
