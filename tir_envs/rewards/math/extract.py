"""Which text of a read answer is graded against a gold.

The answer itself is read by the protocol (``tir_envs.answers.math``); this module says how
what it read meets a gold:

* ``graded_texts(pred, gold)``: the texts of ``pred`` (a ``FinalAnswer``'s boxes, the values
  of an equality chain) the grader checks against a given gold.
"""

from __future__ import annotations

import functools
import re

from tir_envs.rewards.math.chains import stated_values, top_level_sides
from tir_envs.rewards.math.codestyle import matching_bracket, top_level_items
from tir_envs.rewards.math.hedge import has_disjunction
from tir_envs.rewards.math.normalize import light_normalize, prepare_answer

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
