"""The 25 IFEval instruction types (Zhou et al. 2023): what each asks and how it is checked.

Each checker is a pure function ``(response, **kwargs) -> bool`` written from the instruction's
definition in the IFEval paper and its reference checker's documented behaviour (counts,
separators, case rules), so verdicts agree with the reference on the same response.  Where the
reference would draw a random parameter (a missing or out-of-range argument, a "letter" that is
not a letter), we reject the arguments instead: a reward must be a function of its inputs.  The
user-supplied words (keywords, section and postscript markers) are matched literally, never as
regular expressions; for every prompt of IFEval that is the same thing (docs/ifeval.md).

``check_instruction(instruction_id, response, kwargs)`` is the entry point;
``validate_kwargs`` (the schema, ``tir_envs.data.ifeval.arguments``) normalises an
instruction's arguments and names what is wrong with them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from tir_envs.data.ifeval.arguments import PARAMS, validate_kwargs
from tir_envs.rewards.ifeval.text import (LanguageUndetectable, count_sentences, count_words,
                                          detect_language, word_tokens)

#: the three answers ``detectable_format:constrained_response`` accepts (case-sensitive)
CONSTRAINED_RESPONSES = ("My answer is yes.", "My answer is no.", "My answer is maybe.")



def _compare(count: int, relation: str, threshold: int) -> bool:
    """IFEval's two relations: ``less than`` is strict, ``at least`` inclusive."""
    return count < threshold if relation == "less than" else count >= threshold


# --- keywords -------------------------------------------------------------------------------

def keywords_existence(response: str, *, keywords: list[str]) -> bool:
    """Every keyword occurs somewhere, case-insensitively (as a substring, not a whole word)."""
    return all(re.search(re.escape(keyword), response, flags=re.IGNORECASE)
               for keyword in keywords)


def keywords_frequency(response: str, *, keyword: str, frequency: int, relation: str) -> bool:
    """Case-insensitive, non-overlapping occurrences of ``keyword`` (as a substring) vs
    ``frequency``."""
    hits = len(re.findall(re.escape(keyword.strip()), response, flags=re.IGNORECASE))
    return _compare(hits, relation, frequency)


def forbidden_words(response: str, *, forbidden_words: list[str]) -> bool:
    """No forbidden word appears as a whole word (``\\b`` boundaries), in any case."""
    return not any(re.search(r"\b" + re.escape(word) + r"\b", response, flags=re.IGNORECASE)
                   for word in forbidden_words)


def letter_frequency(response: str, *, letter: str, let_frequency: int,
                     let_relation: str) -> bool:
    """Occurrences of one character, ignoring case, vs ``let_frequency``."""
    return _compare(response.lower().count(letter.lower()), let_relation, let_frequency)


# --- language and case ----------------------------------------------------------------------

def response_language(response: str, *, language: str) -> bool:
    """The whole response is detected as ``language``; text with no language in it passes."""
    try:
        return detect_language(response) == language
    except LanguageUndetectable:
        return True


def english_capital(response: str) -> bool:
    """All cased characters upper case, and the text is English."""
    return response.isupper() and _is_english(response)


def english_lowercase(response: str) -> bool:
    """All cased characters lower case, and the text is English."""
    return response.islower() and _is_english(response)


def _is_english(response: str) -> bool:
    try:
        return detect_language(response) == "en"
    except LanguageUndetectable:
        return True


def capital_word_frequency(response: str, *, capital_frequency: int,
                           capital_relation: str) -> bool:
    """Word tokens written all in capitals (``str.isupper``) vs ``capital_frequency``."""
    capitals = sum(token.isupper() for token in word_tokens(response))
    return _compare(capitals, capital_relation, capital_frequency)


# --- length ---------------------------------------------------------------------------------

def number_sentences(response: str, *, num_sentences: int, relation: str) -> bool:
    return _compare(count_sentences(response), relation, num_sentences)


def number_words(response: str, *, num_words: int, relation: str) -> bool:
    return _compare(count_words(response), relation, num_words)


_DIVIDER = re.compile(r"\s?\*\*\*\s?")


def number_paragraphs(response: str, *, num_paragraphs: int) -> bool:
    """Exactly ``num_paragraphs`` paragraphs separated by the markdown divider ``***``.

    An empty piece is allowed only before the first or after the last divider.
    """
    pieces = _DIVIDER.split(response)
    last = len(pieces) - 1
    if any(not piece.strip() for piece in pieces[1:last]):
        return False
    count = len(pieces) - sum(not pieces[i].strip() for i in {0, last})
    return count == num_paragraphs


_FIRST_WORD_STOP = frozenset(".,?!'\"")


def nth_paragraph_first_word(response: str, *, num_paragraphs: int, nth_paragraph: int,
                             first_word: str) -> bool:
    """``num_paragraphs`` non-empty paragraphs separated by blank lines (``\\n\\n``), and
    paragraph ``nth_paragraph`` (1-based, counted in the raw split) starts with ``first_word``.

    The word is compared in lower case, with leading quotes dropped and anything from the
    first punctuation mark on cut off (``"Summer,`` reads as ``summer``).
    """
    pieces = response.split("\n\n")
    count = sum(bool(piece.strip()) for piece in pieces)
    if nth_paragraph > count:
        return False
    paragraph = pieces[nth_paragraph - 1].strip()
    if not paragraph:
        return False
    word = paragraph.split()[0].lstrip("'").lstrip('"')
    head = []
    for ch in word:
        if ch in _FIRST_WORD_STOP:
            break
        head.append(ch.lower())
    return count == num_paragraphs and "".join(head) == first_word.lower()


# --- detectable content and format ----------------------------------------------------------

def number_placeholders(response: str, *, num_placeholders: int) -> bool:
    """At least ``num_placeholders`` square-bracket placeholders like ``[name]`` (one line each)."""
    return count_placeholders(response) >= num_placeholders


def count_placeholders(text: str) -> int:
    r"""Matches of IFEval's ``\[.*?\]``: per line, each ``[`` pairs with the next ``]``.

    Counted with string searches: the regex takes quadratic time on a line of many ``[``.
    """
    count = 0
    for line in text.split("\n"):
        start = line.find("[")
        while start >= 0:
            close = line.find("]", start + 1)
            if close < 0:
                break
            count += 1
            start = line.find("[", close + 1)
    return count


def postscript(response: str, *, postscript_marker: str) -> bool:
    """A postscript introduced by the marker, in any case; ``P.S.`` and ``P.P.S`` also match
    with a space after a dot (``p. s.``, ``P. P. S``)."""
    text = response.lower()
    marker = postscript_marker.strip()
    if marker == "P.P.S":
        pattern = r"p\.\s?p\.\s?s"
    elif marker == "P.S.":
        pattern = r"p\.\s?s\."
    else:
        pattern = re.escape(marker.lower())
    return re.search(pattern, text) is not None


def number_bullet_lists(response: str, *, num_bullets: int) -> bool:
    """Exactly ``num_bullets`` markdown bullet lines: ``* item`` (not ``**``) or ``- item``."""
    return count_bullets(response) == num_bullets


def count_bullets(text: str) -> int:
    r"""Matches of IFEval's two multi-line patterns ``^\s*\*[^\*].*$`` and ``^\s*-.*$``.

    Computed in one pass per pattern instead of by the regexes, which rescan a run of blank
    lines from each line start (quadratic time: a reply of 40,000 newlines took 15 s).
    Semantics kept: ``\s*`` crosses line breaks, and the character after ``*`` may be a line
    break, in which case the bullet's match runs to the end of the next line.
    """
    n = len(text)
    first_solid = [n] * (n + 1)  # index of the first non-whitespace character at or after i
    for i in range(n - 1, -1, -1):
        first_solid[i] = first_solid[i + 1] if text[i].isspace() else i

    def star(q: int) -> int | None:  # end of the match when a star bullet starts at q
        if q + 1 < n and text[q] == "*" and text[q + 1] != "*":
            return _line_end(text, q + 2)
        return None

    def dash(q: int) -> int | None:
        return _line_end(text, q + 1) if q < n and text[q] == "-" else None

    return sum(_count_line_starts(text, first_solid, match) for match in (star, dash))


def _line_end(text: str, start: int) -> int:
    end = text.find("\n", start)
    return len(text) if end < 0 else end


def _count_line_starts(text: str, first_solid: list[int], match) -> int:
    r"""``re.findall`` of a ``^\s*<head>.*$`` pattern (MULTILINE), given where the head can
    match: scan line starts; a failed start skips every line start up to the same head."""
    n, count, p = len(text), 0, 0
    while p <= n:
        q = first_solid[p]
        end = match(q)
        if end is None:
            newline = text.find("\n", q)
            if newline < 0:
                break
            p = newline + 1
            continue
        count += 1
        if end >= n:
            break
        p = end if text[end - 1] == "\n" else end + 1
    return count


def constrained_response(response: str) -> bool:
    """The response contains one of the three allowed answers, exactly as written, and no
    other of them: "My answer is yes. My answer is no." hedges (the reference accepts it)."""
    return sum(option in response for option in CONSTRAINED_RESPONSES) == 1


def number_highlighted_sections(response: str, *, num_highlights: int) -> bool:
    """At least ``num_highlights`` non-empty ``*highlighted*`` spans within a line.  IFEval
    also counts double-star spans, so ``**bold**`` counts once and ``***both***`` twice."""
    single = [m for m in re.findall(r"\*[^\n\*]*\*", response) if m.strip("*").strip()]
    double = [m for m in re.findall(r"\*\*[^\n\*]*\*\*", response) if m[2:-2].strip()]
    return len(single) + len(double) >= num_highlights


def multiple_sections(response: str, *, section_spliter: str, num_sections: int) -> bool:
    """At least ``num_sections`` section headers ``<spliter> <number>`` (case-sensitive)."""
    splitter = r"\s?" + re.escape(section_spliter.strip()) + r"\s?\d+\s?"
    return len(re.split(splitter, response)) - 1 >= num_sections


_FENCE_OPENINGS = ("```json", "```Json", "```JSON", "```")


def json_format(response: str) -> bool:
    """The whole response parses as JSON, optionally inside one markdown code fence."""
    text = response.strip()
    for opening in _FENCE_OPENINGS:  # in turn, as IFEval strips them
        text = text.removeprefix(opening)
    text = text.removesuffix("```").strip()
    try:
        json.loads(text)
    except (ValueError, RecursionError):  # nesting deeper than Python parses: not followed
        return False
    return True


def title(response: str) -> bool:
    r"""A title in double angular brackets, ``<<title>>``, on one line and not blank.

    IFEval's pattern ``<<[^\n]+>>`` matches, per line, from the first ``<<`` to the last
    ``>>`` (greedy); found here with two string searches per line instead of a regex that
    takes quadratic time on a line of many ``<<``.
    """
    for line in response.split("\n"):
        start, end = line.find("<<"), line.rfind(">>")
        if start >= 0 and end >= start + 3 and line[start:end + 2].lstrip("<").rstrip(">").strip():
            return True
    return False


# --- combinations and start/end -------------------------------------------------------------

def two_responses(response: str) -> bool:
    """Two different non-empty responses separated by ``******`` (six asterisks)."""
    pieces = response.split("******")
    last = len(pieces) - 1
    if any(not piece.strip() for piece in pieces[1:last]):
        return False
    answers = [piece for piece in pieces if piece.strip()]
    return len(answers) == 2 and answers[0].strip() != answers[1].strip()


def repeat_prompt(response: str, *, prompt_to_repeat: str) -> bool:
    """The response starts by repeating the request, ignoring case and outer whitespace."""
    return response.strip().lower().startswith(prompt_to_repeat.strip().lower())


def end_checker(response: str, *, end_phrase: str) -> bool:
    """The response ends with ``end_phrase`` (ignoring case, outer whitespace and quotes)."""
    return response.strip().strip('"').lower().endswith(end_phrase.strip().lower())


def quotation(response: str) -> bool:
    """The whole response is wrapped in double quotation marks."""
    text = response.strip()
    return len(text) > 1 and text[0] == '"' and text[-1] == '"'


def no_comma(response: str) -> bool:
    return "," not in response


# --- the registry ---------------------------------------------------------------------------

@dataclass(frozen=True)
class InstructionType:
    """One instruction id: its checker and the arguments it takes (all required)."""

    id: str
    check: Callable[..., bool]
    params: tuple[str, ...] = ()


_CHECKS: dict[str, Callable[..., bool]] = {
    "keywords:existence": keywords_existence,
    "keywords:frequency": keywords_frequency,
    "keywords:forbidden_words": forbidden_words,
    "keywords:letter_frequency": letter_frequency,
    "language:response_language": response_language,
    "length_constraints:number_sentences": number_sentences,
    "length_constraints:number_paragraphs": number_paragraphs,
    "length_constraints:number_words": number_words,
    "length_constraints:nth_paragraph_first_word": nth_paragraph_first_word,
    "detectable_content:number_placeholders": number_placeholders,
    "detectable_content:postscript": postscript,
    "detectable_format:number_bullet_lists": number_bullet_lists,
    "detectable_format:constrained_response": constrained_response,
    "detectable_format:number_highlighted_sections": number_highlighted_sections,
    "detectable_format:multiple_sections": multiple_sections,
    "detectable_format:json_format": json_format,
    "detectable_format:title": title,
    "combination:two_responses": two_responses,
    "combination:repeat_prompt": repeat_prompt,
    "startend:end_checker": end_checker,
    "change_case:capital_word_frequency": capital_word_frequency,
    "change_case:english_capital": english_capital,
    "change_case:english_lowercase": english_lowercase,
    "punctuation:no_comma": no_comma,
    "startend:quotation": quotation,
}

#: every instruction id (``tir_envs.data.ifeval.arguments``, the schema) with its checker
INSTRUCTIONS: dict[str, InstructionType] = {
    iid: InstructionType(iid, _CHECKS[iid], params) for iid, params in PARAMS.items()}


def check_instruction(instruction_id: str, response: str,
                      kwargs: Mapping[str, Any] | None = None) -> bool:
    """Whether ``response`` follows one instruction (the strict check; a blank response
    follows nothing)."""
    args = validate_kwargs(instruction_id, kwargs)
    if not response.strip():
        return False
    return INSTRUCTIONS[instruction_id].check(response, **args)
