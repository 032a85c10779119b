"""Answers that hedge: several candidates offered as one answer, so that one of them may hit.

First, an answer may hold only what an answer of the gold's type may hold
(``allowed.refusal``: an allow-list, so a form nobody listed, ``41 \\to 42`` or
``\\cancel{41} 42``, is refused, not paid).  The rules below then judge answers made only of
allowed parts, where the parts themselves are honest but their arrangement hedges.

A policy that boxes ``41 \\lor 42``, ``41 \\text{ or } 42``, ``40 \\le x \\le 45``,
``42 \\pm 1`` or ``41 = 42`` has not answered; Math-Verify reads several of these as their last
part (``\\lor``, ``\\vee``, ``||``, an equality chain) and would pay them.  Here they are found
in the text before any symbolic check, and are wrong unless the gold itself is such a
statement:

* a *disjunction* (``\\lor``, ``\\vee``, ``∨``, ``||``, ``\\mid``, a lone ``|`` or ``\\|``,
  ``\\&``, the word ``or`` bare or in ``\\text{}``) against a single-valued gold is a hedge.
  Against a list/set gold (``1, -2``) it is the way an equation's solution set is spoken
  ("x = 1 or x = -2"): it is read as a list separator (``as_list``), and the list must then
  equal the gold set exactly.
* a *range* (``<``, ``>``, ``\\le``, ``\\ge``, ``\\neq``, their variants) is a hedge when the
  gold states no relation and is no set of reals (``\\infty``, ``\\cup``, ``\\in``, a bracketed
  interval: there Math-Verify's own rule decides).
* ``\\pm``/``\\mp`` is a hedge when the gold is a single value (a list gold may be written
  with or without it: ``1 \\pm \\sqrt{5}``).
* a *chain* whose plain-number sides differ (``41 = 42``; with ``\\approx``/``\\sim``, by more
  than 1%: ``42 \\approx 41``) is a hedge: Math-Verify grades one side of a relation.
* *numerals apart* (``\\hat 41 42``, ``41 \\text{ cm } 42 \\text{ cm}``: two numbers with only
  spacing, units or an accent between) against a single value are two values.
* *several lines* (``41 \\\\ 42``, a ``cases`` block; matrices and arrays aside) and a *union*
  (``41 \\cup 42``) are hedges against a single value.
* a *box beside other text* (``41 \\boxed{42}``: what extraction leaves of
  ``\\boxed{41 \\boxed{42}}``) is a hedge unless the gold holds a box: Math-Verify would read
  the inner box.

Several boxes are checked by the grader pool (``extract.graded_texts``): against a
single-valued gold each of them must be right.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction

from tir_envs.rewards.math.allowed import refusal
from tir_envs.rewards.math.normalize import as_rational, light_normalize

_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|textrm|mathrm|mbox|operatorname)\s*\{([^{}]*)\}")
_OR_WORD = re.compile(r"(?<![\\A-Za-z])(?:either\s+)?\bor\b", re.IGNORECASE)
_EITHER = re.compile(r"(?<![\\A-Za-z])either\b\s*", re.IGNORECASE)
_OR_SYMBOL = re.compile(r"\\(?:lor|vee)(?![A-Za-z])|∨|\\&"
                        r"|(?<=[\w})\].])\s*\|\|\s*(?=[\w{(\[\\+-])")
_MID = re.compile(r"\\mid(?![A-Za-z])")  # "41 \mid 42"; in a set-builder "\{x \mid ...\}" it is not
_BAR = re.compile(r"(?<![|\\])\|(?!\|)")  # a single bar: pairs are absolute values, an odd one is not
_NORM_BAR = re.compile(r"\\\|")  # "\|": pairs are a norm, an odd one is "parallel"/"or"
_RANGE = re.compile(r"(?<!\\)[<>≤≥≠]|!=|\\(?:le|leq|leqslant|ge|geq|geqslant|lt|gt|ne|neq|nleq"
                    r"|ngeq|lessgtr|gtrless)(?![A-Za-z])")
# Golds that are sets of reals (a range answer may be their honest form; Math-Verify decides).
_INTERVAL_GOLD = re.compile(r"\\infty|\\cup|\\in(?![A-Za-z])|(?<!sqrt)\[[^\[\]]*,[^\[\]]*[\])]"
                            r"|\([^()]*,[^()]*\]")
_PAIR = re.compile(r"[(\[][^()\[\]]*,")  # a tuple, point or interval
_CUP = re.compile(r"\\cup(?![A-Za-z])|∪")
_PLUS_MINUS = re.compile(r"\\(?:pm|mp)(?![A-Za-z])|±|∓")
_MATRIX = re.compile(r"\\begin\{([pbvVB]?matrix|smallmatrix|array)\}.*?\\end\{\1\}", re.DOTALL)
# A line break (not a doubled backslash before a command: "\\left" is an escaping artefact).
_LINES = re.compile(r"\\\\(?![A-Za-z])|\\begin\{(?:cases|aligned|align\*?|gathered|split)\}")
_STACKED = re.compile(r"\\(?:overset|stackrel|underset)\s*\{[^{}]*\}\s*\{([^{}]*)\}")
_RELATION_SPLIT = re.compile(r"(?<![<>!\\])=(?!=)")
_APPROX = re.compile(r"\\(?:approx|sim|simeq|thickapprox|thicksim)(?![A-Za-z])|≈")
_CHAIN_SPLIT = re.compile(_RELATION_SPLIT.pattern + "|" + _APPROX.pattern)
_NEAR = Fraction(1, 100)  # sides of an approximation further apart than this are two answers
# An answer of digits and arithmetic only (most: plain numbers) skips the rules below.
_PLAIN = re.compile(r"[0-9 .+\-*/^()]*")


def _words(answer: str) -> str:
    """``answer`` with LaTeX text wrappers removed, so ``\\text{ or }`` reads as `` or ``."""
    return _TEXT_WRAPPER.sub(r" \1 ", answer)


def _odd_bar(answer: str) -> bool:
    return len(_BAR.findall(answer)) % 2 == 1 or len(_NORM_BAR.findall(answer)) % 2 == 1


@functools.lru_cache(maxsize=8192)  # golds repeat across a GRPO group
def has_disjunction(answer: str) -> bool:
    """Whether ``answer`` joins parts with "or" (``\\lor``, ``\\vee``, ``||``, ``\\mid`` or a
    lone ``|``, the word) or "and" (``\\&``)."""
    return bool(_OR_SYMBOL.search(answer) or _OR_WORD.search(_words(answer))
                or (_MID.search(answer) and "\\{" not in answer) or _odd_bar(answer))


def as_list(answer: str) -> str:
    """``answer`` with each disjunction turned into a list comma (``1 \\lor -2`` -> ``1, -2``)."""
    s = _OR_SYMBOL.sub(", ", answer)
    if "\\{" not in s:
        s = _MID.sub(", ", s)
    if _odd_bar(s):
        s = _BAR.sub(", ", _NORM_BAR.sub(", ", s))
    if _OR_WORD.search(_words(s)):
        s = _OR_WORD.sub(", ", _EITHER.sub("", _words(s)))
    return re.sub(r"(?:\s*,\s*)+", ", ", s).strip(" ,")


def _numbers(sides: list[str]) -> set[Fraction]:
    values = {as_rational(light_normalize(side)) for side in sides}
    values.discard(None)
    return values


def _unequal_chain(answer: str) -> bool:
    """Whether ``answer`` is a chain of ``=`` with two plain-number sides that differ, or of
    ``\\approx``/``\\sim`` (and ``=``) with two more than 1% apart (``41 = 42``,
    ``42 \\approx 41``; not ``\\frac13 \\approx 0.333``)."""
    s = _STACKED.sub(r"\1", answer)
    if not _APPROX.search(s) and len(_numbers(_RELATION_SPLIT.split(s))) > 1:
        return True
    near = _numbers(_CHAIN_SPLIT.split(s))
    return len(near) > 1 and max(near) - min(near) > _NEAR * max(abs(v) for v in near)


# Numerals apart: two digit runs with only spacing, a unit in \text{} or an accent between
# (``\hat 41 42``, ``41 \text{ cm } 42 \text{ cm}``, ``41 \; 42``) are two values.  A run
# of exactly three digits after a space is a thousands group (``58\,500``, ``1 000 000``).
_UNIT_TEXT = re.compile(r"\\(?:text|textrm|mathrm|mbox|operatorname)\s*\{[A-Za-z .]*\}")
_SPACE_CMD = re.compile(r"\\[,;:! ]|\\q?quad(?![A-Za-z])|~")
_ACCENT = re.compile(r"\\(?:hat|bar|vec|dot|ddot|tilde|widehat|widetilde|overline|underline"
                     r"|mathbf|mathit|boldsymbol|bm|mathsf|mathcal|mathrm)(?![A-Za-z])")
_APART = re.compile(r"\d\s+(?!\d{3}(?!\d))\d")


def _numerals_apart(answer: str) -> bool:
    """Whether two numerals stand side by side with only spacing, units or accents between."""
    return bool(_APART.search(_ACCENT.sub(" ", _SPACE_CMD.sub(" ", _UNIT_TEXT.sub(" ", answer)))))


def _several_lines(answer: str) -> bool:
    """Whether ``answer`` spreads over lines (``\\\\``, a ``cases`` block), matrices aside."""
    return bool(_LINES.search(_MATRIX.sub("", answer)))


# An extracted answer that still holds a box: the box stood beside other text inside the
# answer's box (``\\boxed{41 \\boxed{42}}``), which Math-Verify would read as the inner box.
_BOX_INSIDE = re.compile(r"\\(?:boxed|fbox)\s*\{")


def _box_beside_text(answer: str) -> bool:
    """Whether ``answer`` holds a box that is not the whole of it (boxes within boxes peeled)."""
    while True:
        m = _BOX_INSIDE.search(answer)
        if m is None:
            return False
        text = answer.strip().strip("$").strip()
        if m.start() != answer.index(text) or not text.endswith("}"):
            return True
        depth, i = 0, m.end() - 1 - answer.index(text)
        for j in range(i, len(text)):
            depth += {"{": 1, "}": -1}.get(text[j], 0) if text[j - 1:j] != "\\" else 0
            if depth == 0:
                break
        if j != len(text) - 1:
            return True
        answer = text[i + 1:-1]


def hedge_reason(pred: str, gold: str, gold_is_list: bool) -> str | None:
    """Why ``pred`` is a hedge against ``gold`` (see the module docstring), or ``None``.

    Expects ``prepare_answer``ed text; ``gold_is_list`` is ``extract.is_multi_valued(gold)``.
    A disjunction against a list gold is not a hedge: the caller reads it with ``as_list``."""
    if _box_beside_text(pred) and not _BOX_INSIDE.search(gold):
        return "hedge: a box beside other text (the answer is the whole box)"
    refused = refusal(pred, gold, gold_is_list, bool(
        _INTERVAL_GOLD.search(gold) or _RANGE.search(gold) or _PAIR.search(gold)))
    if refused:
        return refused
    single = not (gold_is_list or _INTERVAL_GOLD.search(gold) or _PAIR.search(gold)
                  or _RANGE.search(gold))
    if has_disjunction(pred) and not gold_is_list and not has_disjunction(gold):
        return "hedge: a disjunction of candidates is not an answer"
    if _RANGE.search(pred) and not _RANGE.search(gold) and not _INTERVAL_GOLD.search(gold):
        return "hedge: a range or inequality is not a value"
    if _PLUS_MINUS.search(pred) and not gold_is_list:
        return "hedge: \\pm names two values"
    if _unequal_chain(pred) and not _unequal_chain(gold):
        return "hedge: a chain of different numbers"
    if _several_lines(pred) and not _several_lines(gold) and not gold_is_list:
        return "hedge: candidates on several lines"
    if _CUP.search(pred) and single:
        return "hedge: a union is not a value"
    if single and _numerals_apart(pred) and not _numerals_apart(gold):
        return "hedge: two numbers side by side are two values"
    return None


def read_pair(pred: str, gold: str, gold_is_list: bool) -> tuple[str, str, str | None]:
    """``(pred, gold, reason)``: ``reason`` says why ``pred`` is a hedge (it is then wrong);
    otherwise disjunctions are read as lists where the gold is a list or set
    (``x = 1 \\text{ or } x = -2`` against ``1, -2``), or itself a disjunction."""
    if _PLAIN.fullmatch(pred):
        return pred, as_list(gold) if has_disjunction(gold) else gold, None
    reason = hedge_reason(pred, gold, gold_is_list)
    if reason:
        return pred, gold, reason
    if gold_is_list and has_disjunction(pred):
        pred = as_list(pred)
    if has_disjunction(gold):
        gold = as_list(gold)
    return pred, gold, None
