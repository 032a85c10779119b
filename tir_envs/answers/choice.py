"""Which option letter did the policy choose?

The choice is read from the policy's final response only (its reasoning removed), in order:
the ``\\boxed{}`` answers, else an "answer is B" / "Answer: (B)" phrase, else a response that is
nothing but a letter (``B``, ``(B)``, ``B.``).  Inside a box, ``B``, ``(B)``, ``B.``,
``\\text{B}`` and ``B. <option text>`` all choose B.  Strictly one letter: a response that
names several (``\\boxed{B, C}``, ``B or C``, two boxes with different letters, two "answer is"
phrases that disagree, ``\\boxed{A \\lor B}``, "the answer is B (or possibly C)", ``(A)(B)``)
chose nothing and is wrong, so hedging never pays.
"""

from __future__ import annotations

import re

from tir_envs.formats.boxed import boxed_spans

_WRAPPER = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\s*\{([^{}]*)\}")
_SEP = r"(?:\s*(?:,|/|&|\band\b|\bor\b)\s*|\s+)"


def _letter_pattern(letters: str) -> tuple[re.Pattern, re.Pattern, re.Pattern]:
    one = rf"\(?([{letters}])\)?"
    only = re.compile(rf"^{one}[.:)]?$", flags=re.IGNORECASE)  # the whole text is one letter
    lead = re.compile(rf"^{one}(?:[.:)]\s+|\s*$|\s+(?![{letters}]\b))")  # "B. option text"
    several = re.compile(rf"^\(?[{letters}]\)?(?:{_SEP}\(?[{letters}]\)?)+[.]?$",
                         flags=re.IGNORECASE)
    return only, lead, several


def _more_letters(text: str, at: int, letters: str) -> frozenset[str]:
    """Option letters named in ``text`` from ``at`` on, right after a chosen one, as its
    alternatives: `` \\lor B``,
    `` (or possibly C)``, ``/C``, ``(A)(B)``, and after any command or sign whatever
    (``\\to B``, ``\\in \\{A, B\\}``, ``｜ B``, ``:= B``: a sign no rule names joins too).
    Upper-case only ("or a claim" is prose), and only after a joining word or sign
    (``B. A valid argument`` chose B)."""
    more = re.compile(rf"\s*(?:\(?\s*(?:or|and|vs\.?|versus|或者?|还是|和|与|及)(?:\s+\w+){{0,2}}"
                      rf"|(?:\\[A-Za-z]+\s*|(?::(?=\S))?[^\w\s().:]+\s*)+|(?<=\))(?=\())"
                      rf"\s*\(?([{letters.upper()}])\)?(?!\w)")
    found = set()
    while (m := more.match(text, at)) and m.end() > at:
        found.add(m.group(1))
        at = m.end()
    return frozenset(found)


_OPTION_WORD = re.compile(r"^(?:option|choice)\s+", flags=re.IGNORECASE)


def _clean(text: str) -> str:
    text = _WRAPPER.sub(r"\1", text).strip().strip("$*").strip()
    return _OPTION_WORD.sub("", text)


def named_letters(candidate: str, letters: str = "ABCD") -> frozenset[str]:
    """The option letters a candidate answer names: one for ``"(B)"`` or ``"B. text"``,
    several for ``"B, C"`` or ``"B or C"``, none for anything else (``"12"``, ``"Option"``)."""
    only, lead, several = _letter_pattern(letters)
    text = _clean(candidate)
    if several.match(text):
        return frozenset(re.findall(rf"[{letters}]", text.upper()))
    m = only.match(text) or lead.match(text)
    if not m:
        return frozenset()
    return frozenset({m.group(1).upper()}) | _more_letters(text, m.end(), letters)


def _boxed_letters(text: str, letters: str) -> list[frozenset[str]]:
    found = []
    for _, end, content in boxed_spans(text):
        named = named_letters(content, letters)
        found.append(named | _more_letters(text, end, letters) if named else named)
    return found


def _phrase_letters(text: str, letters: str) -> list[frozenset[str]]:
    phrase = re.compile(
        rf"\b(?:final answer|answer|correct (?:option|choice)|option|choice)\s*(?:is|:|=)\s*"
        rf"(?:option\s+)?(\(?[{letters}]\)?(?:{_SEP}\(?[{letters}]\)?)*)(?![\w])",
        flags=re.IGNORECASE)
    found = []
    for m in phrase.finditer(text):
        named = m.group(1)
        if len(named) == 1 and named.islower() and re.match(r"\s+\w", text[m.end():]):
            continue  # "the answer is a contradiction": an article, not option a
        found.append(named_letters(named, letters) | _more_letters(text, m.end(), letters))
    return found


def extract_choice(response: str | None, letters: str = "ABCD") -> str | None:
    """The single option letter ``response`` chooses, or None (no choice, or several).

    Boxes that name no letter (``\\boxed{3}`` in a worked step) are not choices; the letters
    all the boxes name, else all the answer phrases name, must be exactly one.
    """
    if not response or not response.strip():
        return None
    for found in (_boxed_letters(response, letters), _phrase_letters(response, letters)):
        named = frozenset().union(*found)
        if named:
            return next(iter(named)) if len(named) == 1 else None
    short = response.strip().rstrip(".")
    named = named_letters(short, letters) if len(short) <= 3 else frozenset()
    return next(iter(named)) if len(named) == 1 else None
