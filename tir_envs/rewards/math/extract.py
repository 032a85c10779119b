"""Finding the final answer a policy wrote.

* ``last_boxed_answer(text)``: the last ``\\boxed{...}`` (or ``\\fbox{...}``), as a plain string
  (what a dataset's worked solution gives as its answer).
* ``extract_final_answer(text, fallback=False)``: the policy's answer as a ``FinalAnswer``: the
  last box, plus the boxes that form the final answer with it (``\\boxed{-2}`` and
  ``\\boxed{1}``); with ``fallback`` also "final answer is ..." and the last ``$...$``.
* ``graded_texts(pred, gold)``: which of those the grader checks against a given gold.

Braces are matched by counting, so nested groups (``\\boxed{\\frac{1}{2}}``) come out whole; an
escaped brace (``\\{``) does not count.  The caller passes only text the policy generated: an
answer printed by a tool is never an answer the policy gave.
"""

from __future__ import annotations

import bisect
import functools
import re

from tir_envs.rewards.math.codestyle import matching_bracket, top_level_items
from tir_envs.rewards.math.hedge import has_disjunction
from tir_envs.rewards.math.normalize import light_normalize, prepare_answer

# \boxed{...}, \fbox{...}, also with a space before the brace ("\boxed {x}").
_OPENER = re.compile(r"\\(?:boxed|fbox)\s*\{")
# The brace-less form "\boxed 5": one token up to whitespace or a dollar sign.
_BARE = re.compile(r"\\boxed[ \t]+([^\s${][^\s$]*)")


_TOKEN = re.compile(r"\\.|[{}]", re.DOTALL)  # an escaped character (\{ counts as none), or a brace

Box = tuple[int, int, int, int]  # start, end, content start, content end


def _boxes(text: str) -> list[Box]:
    """Every complete box in ``text``, sorted by start.  One pass over the braces (a stack), so
    thousands of unclosed ``\\boxed{`` cost linear time, not a scan to the end for each."""
    openers = {m.end() - 1: m.start() for m in _OPENER.finditer(text)}
    boxes: list[Box] = []
    if openers:
        stack: list[int] = []  # per open brace: its position
        for m in _TOKEN.finditer(text):
            token = m.group()
            if token == "{":
                stack.append(m.start())
            elif token == "}" and stack:
                brace = stack.pop()
                if brace in openers:
                    boxes.append((openers[brace], m.end(), brace + 1, m.start()))
    boxes += [(m.start(), m.end(), m.start(1), m.end(1)) for m in _BARE.finditer(text)]
    boxes.sort()
    return boxes


def boxed_spans(text: str) -> list[tuple[int, int, str]]:
    """Every complete boxed answer in ``text`` as ``(start, end, content)``, in order."""
    return [(start, end, text[a:b]) for start, end, a, b in _boxes(text)]


def _top_level(boxes: list[Box]) -> list[Box]:
    """The boxes not nested inside another (``\\boxed{\\boxed{3}}`` counts once)."""
    out: list[Box] = []
    for box in sorted(boxes, key=lambda b: (b[0], -b[1])):
        if out and box[0] < out[-1][1]:
            continue
        out.append(box)
    return out


class _Unwrapper:
    """A box's content, stripped; while it holds nothing but a box, that box's content
    (``\\boxed{\\boxed{3}}`` is ``3``; ``\\boxed{2 \\boxed{3}}`` stays whole: a hedge), unless
    it is empty.  Iterative, with the boxes indexed by their end, so deep nesting costs neither
    recursion nor quadratic time."""

    def __init__(self, text: str, boxes: list[Box]):
        self.text = text
        self.by_end = sorted(boxes, key=lambda b: (-b[1], b[0]))
        self.keys = [-b[1] for b in self.by_end]

    def __call__(self, box: Box) -> str:
        content = self.text[box[2]:box[3]].strip()
        while True:
            i = bisect.bisect_left(self.keys, -box[3])  # the first box closing inside this one
            if i == len(self.by_end) or self.by_end[i][0] < box[2]:
                return content
            inner = self.by_end[i]
            inner_content = self.text[inner[2]:inner[3]].strip()
            outside = self.text[box[2]:inner[0]] + self.text[inner[1]:box[3]]
            if not inner_content or outside.strip(" \t\n$"):
                return content  # a box beside other text is part of that text (a hedge)
            box, content = inner, inner_content


def last_boxed_answer(text: str | None) -> str | None:
    """The content of the last complete ``\\boxed{}``/``\\fbox{}`` in ``text``, stripped.

    Returns ``None`` when there is none (or it is empty): a missing answer is not an empty one.
    """
    if not text:
        return None
    boxes = _boxes(text)
    if not boxes:
        return None
    unwrap = _Unwrapper(text, boxes)
    return unwrap(unwrap.by_end[0]) or None  # the box that closes last


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
    boxes = _boxes(text)
    top = _top_level(boxes)
    if not top:
        return []
    group = [top[-1]]
    for box in reversed(top[:-1]):
        gap = text[box[1]:group[-1][0]]
        if len(gap) > _MAX_GLUE or not _GLUE.fullmatch(gap):
            break
        group.append(box)
    unwrap = _Unwrapper(text, boxes)
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




# ---------------------------------------------------------------------------- gold shapes
_GROUPED_INT = re.compile(r"[+-]?[1-9]\d{0,2}(?:(?:,|\{,\})\d{3})+")
_LATEX_SPACE = re.compile(r"\\[,;:! ]\s*|\\q?quad\s*")


def _has_top_level_comma(s: str) -> bool:
    return len(top_level_items(s)) > 1


@functools.lru_cache(maxsize=8192)  # the same gold is graded against a whole group
def is_multi_valued(gold: str) -> bool:
    """Whether ``gold`` is a list or set of values (``1, -2``; ``\\{1, 2\\}``; ``(2, 2), (6, 2)``;
    ``1 \\pm \\sqrt{5}``; ``1 \\text{ or } -2``) rather than one value (``(1, 2)`` is one point
    or one interval, ``58,500`` one number)."""
    if has_disjunction(gold):
        return True
    s = _LATEX_SPACE.sub("", gold).replace("\\$", "").strip().strip("$").strip()
    s = s.replace("\\left", "").replace("\\right", "")
    if _GROUPED_INT.fullmatch(s):  # 58,500 and 10,\!080 are numbers; 32, 349 is a list
        return False
    if s.startswith("\\{") and s.endswith("\\}"):
        return True
    if s.startswith("{") and s.endswith("}") and matching_bracket(s, 0) == len(s) - 1:
        s = s[1:-1]  # "{1,2,3}": a set written with plain braces
    if "\\pm" in s or "\\mp" in s:
        return True
    return _has_top_level_comma(s.replace("\\{", "").replace("\\}", "").replace("{,}", ""))


def _python_list_items(pred: str) -> str | None:
    """``"a, b"`` when ``pred`` is a bracketed list of several items (``[-1, 1]``), else None."""
    s = pred.strip()
    if s.startswith("[") and s.endswith("]") and matching_bracket(s, 0) == len(s) - 1:
        inner = s[1:-1].strip()
        if _has_top_level_comma(inner):
            return inner
    return None


def graded_text(pred: str | None, gold: str) -> str | None:
    """The text to grade against a list/set ``gold``, or ``pred`` itself for any other gold: the
    boxes of the final answer joined as a list if ``pred`` has several, and a Python list
    ``[-1, 1]`` (what ``solve`` prints) read as its items, not as the interval LaTeX would make
    of it."""
    if pred is None:
        return None
    if not is_multi_valued(gold):
        return str(pred)
    boxes = getattr(pred, "boxes", ())
    text = ", ".join(boxes) if len(boxes) > 1 else str(pred)
    if not gold.strip().startswith("["):
        text = _python_list_items(text) or text
    return text


def graded_texts(pred: str | None, gold: str) -> list[str | None]:
    """The texts that must all grade correct against ``gold``: ``[graded_text(pred, gold)]``,
    except that several boxes with different contents against a single-valued gold are each
    graded (``\\boxed{41} or \\boxed{42}`` is a hedge, not an answer; the same value boxed
    twice is fine)."""
    boxes = getattr(pred, "boxes", ())
    if len(boxes) < 2 or is_multi_valued(gold):
        return [graded_text(pred, gold)]
    distinct: dict[str, str] = {}
    for box in boxes:
        distinct.setdefault(light_normalize(prepare_answer(box)), box)
    return list(distinct.values()) if len(distinct) > 1 else [str(pred)]
