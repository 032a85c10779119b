"""Answers compared by their form, not as one math expression (TheoremQA, OlympiadBench).

A task may say how its gold is to be compared (``task.meta["answer_form"]``, set by the shipped
data's adapters, ``tir_envs.data.math.adapters``):

* ``"bool"``: True/False; the answer may say it as ``True``/``Yes``/``\\text{false}``/``No``.
* ``"option"``: one option letter, ``(c)`` = ``c`` = ``(C)`` = ``\\text{(c)}``; anything naming
  more than one letter, or none, is wrong.
* ``"ordered_list"``: a vector: the answer's ``[...]``/``(...)`` items must match the gold's in
  number and order, each by the math grader (a set comparison would accept ``[1, 0]`` for
  ``[0, 1]``, and SymPy reads ``[2, 1]`` as an empty interval, equal to every other one).

``strip_unit(answer, unit)``: the task's unit (OlympiadBench's ``unit`` field) written after
the answer is not part of it: ``45 \\text{ minutes}`` is ``45`` when the unit is ``minutes``.
"""

from __future__ import annotations

import re
from typing import Callable

from tir_envs.rewards.math.codestyle import top_level_items

FORMS = ("bool", "option", "ordered_list")
_WRAPPERS = re.compile(r"\\(?:text|textbf|mathrm|mathbf|operatorname)\s*\{([^{}]*)\}")
_TRUE, _FALSE = {"true", "yes", "t"}, {"false", "no", "f"}
_OPTION = re.compile(r"\(?([a-e])\)?")
_BRACKETS = {"[": "]", "(": ")"}


def _plain(text: str) -> str:
    """``text`` without ``$``, ``\\text{}``-like wrappers, spacing commands and a final period."""
    text = _WRAPPERS.sub(r"\1", text.replace("$", ""))
    text = re.sub(r"\\[,;:! ]|~", " ", text)
    return " ".join(text.split()).strip().rstrip(".").strip()


def as_bool(text: str) -> bool | None:
    """The truth value an answer states (``None``: it states none, or both)."""
    word = _plain(text).lower()
    return True if word in _TRUE else False if word in _FALSE else None


def as_option(text: str) -> str | None:
    """The one option letter an answer names (``None``: none, or several)."""
    m = _OPTION.fullmatch(_plain(text).lower().replace("option", "").strip())
    return m.group(1) if m else None


def list_items(text: str) -> list[str] | None:
    """The items of a bracketed list ``[a, b]`` / ``(a, b)`` (``\\left``/``\\right`` allowed);
    ``None`` when the answer is not one bracketed list."""
    text = re.sub(r"\\(?:left|right)\s*", "", _plain(text))
    if len(text) < 2 or _BRACKETS.get(text[0]) != text[-1]:
        return None
    items = top_level_items(text[1:-1])
    return items if all(items) else None


def form_correct(answer: str, gold: str, form: str,
                 equivalent: Callable[[str, str], bool]) -> bool:
    """Whether ``answer`` equals ``gold`` by ``form``; ``equivalent(pred, gold)`` grades one
    list item (the math grader)."""
    if form == "bool":
        value = as_bool(answer)
        return value is not None and value == as_bool(gold)
    if form == "option":
        letter = as_option(answer)
        return letter is not None and letter == as_option(gold)
    if form == "ordered_list":
        items, golds = list_items(answer), list_items(gold)
        return (items is not None and golds is not None and len(items) == len(golds)
                and all(equivalent(p, g) for p, g in zip(items, golds)))
    raise ValueError(f"unknown answer_form {form!r}; choose one of {FORMS}")


def _unit_spellings(unit: str) -> list[str]:
    """How an answer may write ``unit`` after its value, longest first."""
    bare = unit.strip().strip("$").strip()
    if not bare:
        return []
    forms = {bare, f"\\text{{{bare}}}", f"\\text{{ {bare}}}", f"\\mathrm{{{bare}}}",
             f"\\mathrm{{~{bare}}}", f"\\,\\text{{{bare}}}", f"\\ \\text{{{bare}}}"}
    if bare in ("^{\\circ}", "^\\circ", "°"):
        forms |= {"^{\\circ}", "^\\circ", "°", "\\circ", "^{\\circ}."}
    if bare == "%":
        forms |= {"\\%"}
    return sorted(forms, key=len, reverse=True)


def strip_unit(answer: str, unit: str | None) -> str:
    """``answer`` without the task's ``unit`` written after it (once, at the end)."""
    if not unit:
        return answer
    text = answer.rstrip()
    for spelling in _unit_spellings(unit):
        if text.endswith(spelling) and text[:-len(spelling)].strip():
            return text[:-len(spelling)].rstrip().rstrip("\\,~ ").rstrip()
    return answer
