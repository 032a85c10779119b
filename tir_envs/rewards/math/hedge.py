"""Answers that hedge: several candidates offered as one answer, so that one of them may hit.

A policy that boxes ``41 \\lor 42``, ``41 \\text{ or } 42``, ``40 \\le x \\le 45``,
``42 \\pm 1`` or ``41 = 42`` has not answered; Math-Verify reads several of these as their last
part (``\\lor``, ``\\vee``, ``||``, an equality chain) and would pay them.  Here they are found
in the text before any symbolic check, and are wrong unless the gold itself is such a
statement:

* a *disjunction* (``\\lor``, ``\\vee``, ``∨``, ``||``, the word ``or`` bare or in
  ``\\text{}``) against a single-valued gold is a hedge.  Against a list/set gold (``1, -2``)
  it is the way an equation's solution set is spoken ("x = 1 or x = -2"): it is read as a list
  separator (``as_list``), and the list must then equal the gold set exactly.
* a *range* (``<``, ``>``, ``\\le``, ``\\ge``, ``\\neq``, their variants) is a hedge when the
  gold states no relation and is no set of reals (``\\infty``, ``\\cup``, ``\\in``, a bracketed
  interval: there Math-Verify's own rule decides).
* ``\\pm``/``\\mp`` is a hedge when the gold is a single value (a list gold may be written
  with or without it: ``1 \\pm \\sqrt{5}``).
* an *equality chain* whose plain-number sides differ (``41 = 42``) is a hedge: Math-Verify
  grades an equation's last side.

Several boxes are checked by the grader pool (``extract.graded_texts``): against a
single-valued gold each of them must be right.
"""

from __future__ import annotations

import functools
import re

from tir_envs.rewards.math.normalize import as_rational, light_normalize

_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|textrm|mathrm|mbox|operatorname)\s*\{([^{}]*)\}")
_OR_WORD = re.compile(r"(?<![\\A-Za-z])(?:either\s+)?\bor\b", re.IGNORECASE)
_EITHER = re.compile(r"(?<![\\A-Za-z])either\b\s*", re.IGNORECASE)
_OR_SYMBOL = re.compile(r"\\(?:lor|vee)(?![A-Za-z])|∨|(?<=[\w})\].])\s*\|\|\s*(?=[\w{(\[\\+-])")
_RANGE = re.compile(r"(?<!\\)[<>≤≥≠]|\\(?:le|leq|leqslant|ge|geq|geqslant|lt|gt|ne|neq|nleq"
                    r"|ngeq|lessgtr|gtrless)(?![A-Za-z])")
# Golds that are sets of reals (a range answer may be their honest form; Math-Verify decides).
_INTERVAL_GOLD = re.compile(r"\\infty|\\cup|\\in(?![A-Za-z])|(?<!sqrt)\[[^\[\]]*,[^\[\]]*[\])]"
                            r"|\([^()]*,[^()]*\]")
_PLUS_MINUS = re.compile(r"\\(?:pm|mp)(?![A-Za-z])|±|∓")
_RELATION_SPLIT = re.compile(r"(?<![<>!\\])=(?!=)")
# What every hedge above contains: an answer without any of it (most: plain numbers,
# fractions) skips the individual rules.
_MAYBE = re.compile(r"[\\<>|=±∓≤≥≠∨]|or", re.IGNORECASE)


def _words(answer: str) -> str:
    """``answer`` with LaTeX text wrappers removed, so ``\\text{ or }`` reads as `` or ``."""
    return _TEXT_WRAPPER.sub(r" \1 ", answer)


@functools.lru_cache(maxsize=8192)  # golds repeat across a GRPO group
def has_disjunction(answer: str) -> bool:
    """Whether ``answer`` joins parts with "or" (``\\lor``, ``\\vee``, ``||``, the word)."""
    return bool(_OR_SYMBOL.search(answer) or _OR_WORD.search(_words(answer)))


def as_list(answer: str) -> str:
    """``answer`` with each disjunction turned into a list comma (``1 \\lor -2`` -> ``1, -2``)."""
    s = _OR_SYMBOL.sub(", ", answer)
    if _OR_WORD.search(_words(s)):
        s = _OR_WORD.sub(", ", _EITHER.sub("", _words(s)))
    return re.sub(r"(?:\s*,\s*)+", ", ", s).strip(" ,")


def _unequal_chain(answer: str) -> bool:
    """Whether ``answer`` is an equality chain with two plain-number sides that differ."""
    sides = _RELATION_SPLIT.split(answer)
    if len(sides) < 2:
        return False
    values = {as_rational(light_normalize(side)) for side in sides}
    values.discard(None)
    return len(values) > 1


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
    if has_disjunction(pred) and not gold_is_list and not has_disjunction(gold):
        return "hedge: a disjunction of candidates is not an answer"
    if _RANGE.search(pred) and not _RANGE.search(gold) and not _INTERVAL_GOLD.search(gold):
        return "hedge: a range or inequality is not a value"
    if _PLUS_MINUS.search(pred) and not gold_is_list:
        return "hedge: \\pm names two values"
    if _unequal_chain(pred) and not _unequal_chain(gold):
        return "hedge: an equality chain of different numbers"
    return None


def read_pair(pred: str, gold: str, gold_is_list: bool) -> tuple[str, str, str | None]:
    """``(pred, gold, reason)``: ``reason`` says why ``pred`` is a hedge (it is then wrong);
    otherwise disjunctions are read as lists where the gold is a list or set
    (``x = 1 \\text{ or } x = -2`` against ``1, -2``), or itself a disjunction."""
    if not _MAYBE.search(pred):
        return pred, as_list(gold) if has_disjunction(gold) else gold, None
    reason = hedge_reason(pred, gold, gold_is_list)
    if reason:
        return pred, gold, reason
    if gold_is_list and has_disjunction(pred):
        pred = as_list(pred)
    if has_disjunction(gold):
        gold = as_list(gold)
    return pred, gold, None
