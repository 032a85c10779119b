"""Finding the final answer a policy wrote.

* ``last_boxed_answer(text)`` (from ``tir_envs.formats.boxed``, the box scanner): the last
  ``\\boxed{...}`` (or ``\\fbox{...}``), as a plain string (a dataset's worked solution's answer).
* ``extract_final_answer(text, fallback=False)``: the policy's answer as a ``FinalAnswer``: the
  last box, plus the boxes that form the final answer with it (``\\boxed{-2}`` and
  ``\\boxed{1}``); with ``fallback`` also "final answer is ..." and the last ``$...$``.
* ``graded_texts(pred, gold)``: which of those the grader checks against a given gold.

The caller passes only text the policy generated: an
answer printed by a tool is never an answer the policy gave.
"""

from __future__ import annotations

import functools
import re

from tir_envs.formats.boxed import BoxUnwrapper, find_boxes, last_boxed_answer, top_level_boxes
from tir_envs.rewards.math.chains import stated_values, top_level_sides
from tir_envs.rewards.math.codestyle import matching_bracket, top_level_items
from tir_envs.rewards.math.hedge import has_disjunction
from tir_envs.rewards.math.normalize import light_normalize, prepare_answer

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
    twice is fine), and the sides of an equality chain stating several values
    (``\\sqrt{1681} = 42``) are each graded (``chains``)."""
    boxes = getattr(pred, "boxes", ())
    if is_multi_valued(gold):
        return [graded_text(pred, gold)]
    if len(boxes) < 2:
        return _each_value(str(pred), gold) if pred is not None else [None]
    distinct: dict[str, str] = {}
    for box in boxes:
        distinct.setdefault(light_normalize(prepare_answer(box)), box)
    texts = list(distinct.values()) if len(distinct) > 1 else [str(pred)]
    return [v for t in texts for v in _each_value(t, gold)]


def _each_value(text: str, gold: str) -> list[str]:
    """``[text]``, or each value an equality chain in it states (``chains``) when the gold
    states no equality itself."""
    if len(top_level_sides(gold)) > 1:
        return [text]
    return stated_values(prepare_answer(text)) or [text]
