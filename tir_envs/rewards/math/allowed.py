"""What a math answer may contain, given the gold's type: an allow-list.

A deny-list of hedges (``\\lor``, ``or``, ``\\le``) misses every form nobody listed, and
Math-Verify grades the last side of whatever it does not understand: ``41 \\to 42``,
``\\cancel{41} 42``, ``\\color{white}{41} 42``, ``\\tag{41} 42``, ``41 \\cr 42``, ``41 ⋁ 42``,
``41 或 42`` all paid against ``42``.  Here an answer is read as tokens (commands, characters,
words) and every token must be one an answer of the gold's type may hold:

* any answer: digits, variables (single letters), arithmetic (``+ - * / ^ _ ! ' |``), brackets
  and braces, ``=`` (chains are judged by ``hedge``), ``,`` (lists are judged by type), spacing,
  fractions and roots, the usual functions and constants, Greek letters, degrees, percent and
  currency signs, ``\\approx``, math-font wrappers, and in ``\\text{}`` a unit word (``mod`` and
  ``\\bmod`` only where the gold uses them: Math-Verify read ``41 \\bmod 42`` as 42);
* a list or set gold also: ``\\pm``/``\\mp``, ``\\{ \\}``, and "or" (``\\lor``, ``\\vee``, the
  word), read as list separators, and ellipses (``41 \\dots 42`` against 42 was graded as its
  last item: a single value is no sequence);
* an interval or set-of-reals gold also: ``\\cup``, ``\\in``, ``\\infty``, ``\\mathbb``, the
  inequalities;
* a gold that states a relation also: the inequalities;
* a matrix gold also: matrix environments, ``&`` and ``\\\\``;
* and whatever the gold itself is written with (its commands, characters and words).

A subscript is part of a name, never of a value: after a variable (``x_1``, ``a_{n}``), a Greek
letter or an operator that takes one (``\\log_2``, ``\\sum_{k}``) it may stand; after a number
or a group (``42_{41}``, ``(42)_{41}``) only where the gold has a subscript too (``1011_2``).
Graders drop a subscript they cannot read, so ``\\boxed{42_{41}}`` was 42: a second candidate
hidden where it was not graded.

Anything else (an unknown command, a symbol or script no rule names, a word that is no unit
and not in the gold) makes the answer wrong, with the token named.
"""

from __future__ import annotations

import functools
import re

_TOKEN = re.compile(r"\\(?:begin|end)\s*\{[A-Za-z*]+\}|\\[A-Za-z]+|\\.|[A-Za-z]+|\d+|\s+|.",
                    re.DOTALL)
#: wrappers whose braced argument is words (checked as words), and those whose argument is math
_TEXT_WRAPPERS = {"\\text", "\\textbf", "\\textrm", "\\textit", "\\textsf", "\\texttt",
                  "\\textnormal", "\\mbox", "\\mathrm", "\\operatorname", "\\textup"}
_MATH_WRAPPERS = {"\\mathbf", "\\mathit", "\\boldsymbol", "\\mathsf", "\\bm", "\\mathcal"}

_CHARS = set("0123456789+-*/^_!'|()[]{}=,.$% ~\t\n")
_UNICODE = set("π√°∞−×·÷′″²³⁰¹⁴⁵⁶⁷⁸⁹½¼¾")
_COMMANDS = set("""
\\frac \\dfrac \\tfrac \\cfrac \\sqrt \\left \\right \\big \\Big \\bigg \\Bigg \\bigl \\bigr
\\Bigl \\Bigr \\biggl \\biggr \\middle \\cdot \\times \\div \\pi \\infty \\circ \\degree \\prime
\\displaystyle \\textstyle \\scriptstyle \\sin \\cos \\tan
\\cot \\sec \\csc \\arcsin \\arccos \\arctan \\sinh \\cosh \\tanh \\coth \\log \\ln \\lg \\exp
\\max \\min \\gcd \\lcm \\det \\pmod \\binom \\dbinom \\tbinom \\overline \\bar
\\hat \\vec \\widehat \\tilde \\widetilde \\dot \\ddot \\underline \\lfloor \\rfloor \\lceil
\\rceil \\approx \\quad \\qquad \\boxed \\fbox \\sum \\prod \\alpha \\beta \\gamma \\delta
\\epsilon \\varepsilon \\zeta \\eta \\theta \\vartheta \\iota \\kappa \\lambda \\mu \\nu \\xi
\\varpi \\rho \\varrho \\sigma \\varsigma \\tau \\upsilon \\phi \\varphi \\chi \\psi \\omega
\\Gamma \\Delta \\Theta \\Lambda \\Xi \\Pi \\Sigma \\Upsilon \\Phi \\Psi \\Omega \\angle \\%
\\$ \\{ \\} \\, \\; \\: \\! \\| \\_
""".split()) | {"\\ "} | _TEXT_WRAPPERS | _MATH_WRAPPERS
_LIST = {"\\pm", "\\mp", "\\lor", "\\vee", "∨", "±", "∓", "\\emptyset", "\\varnothing",
         "\\ldots", "\\cdots", "\\dots", "\\dotsc", "\\dotsb", "…", "⋯"}
_RELATIONS = {"<", ">", "≤", "≥", "≠", "\\le", "\\leq", "\\leqslant", "\\ge", "\\geq",
              "\\geqslant", "\\lt", "\\gt", "\\ne", "\\neq"}
_SETS = _RELATIONS | {"\\cup", "∪", "\\in", "\\mathbb", "\\emptyset", "\\varnothing",
                      "\\setminus", "\\mid", "\\colon", ":"}
_MATRIX = {"&", "\\\\", "\\begin{pmatrix}", "\\end{pmatrix}", "\\begin{bmatrix}",
           "\\end{bmatrix}", "\\begin{matrix}", "\\end{matrix}", "\\begin{vmatrix}",
           "\\end{vmatrix}", "\\begin{array}", "\\end{array}", "\\begin{smallmatrix}",
           "\\end{smallmatrix}", "\\begin{Bmatrix}", "\\end{Bmatrix}", "\\begin{Vmatrix}",
           "\\end{Vmatrix}", "\\vdots", "\\ddots", "\\cdots", "\\ldots",
           "\\dots"}
_MATRIX_GOLD = re.compile(r"\\begin\s*\{(?:[pbvVB]?matrix|smallmatrix|array)\}")
#: functions and units written bare (``5 cm``, ``\max``-less ``max``) and words in ``\text{}``
_NAMES = set("""
sin cos tan cot sec csc log ln lg exp max min gcd lcm det abs sqrt
""".split())
_UNITS = set("""
unit units sq square squared cubic cubed cu mm cm dm m km in inch inches ft foot feet yd yard
yards mi mile miles meter meters metre metres centimeter centimeters centimetre centimetres
millimeter millimeters kilometer kilometers kilometre kilometres mph kph kmh s sec secs second
seconds min mins minute minutes h hr hrs hour hours day days week weeks month months year years
yr yrs g mg kg gram grams kilogram kilograms lb lbs pound pounds oz ounce ounces ton tons l ml
liter liters litre litres gallon gallons quart quarts pint pints cup cups deg degree degrees
rad radian radians dollar dollars cent cents euro euros percent c f k mps ms cmsq
""".split())
_OR_WORDS = {"or", "either"}
#: commands a subscript may follow (it names a base, an index or a bound, not a second value)
_SUBSCRIPTED = {"\\log", "\\lg", "\\sum", "\\prod", "\\max", "\\min", "\\lim"}
_GREEK = re.compile(r"\\(?:var)?(?:alpha|beta|gamma|delta|epsilon|zeta|eta|theta|iota|kappa|"
                    r"lambda|mu|nu|xi|pi|rho|sigma|tau|upsilon|phi|chi|psi|omega)$",
                    re.IGNORECASE)


def _tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text) if not t.isspace()]


def _norm(token: str) -> str:
    """``\\begin {pmatrix}`` and ``\\begin{pmatrix}`` are one token."""
    return re.sub(r"\s+", "", token) if token.startswith(("\\begin", "\\end")) else token


def _group_end(tokens: list[str], i: int) -> int:
    """Index after the braced group opening at ``tokens[i]`` (``{``), or ``i`` if none."""
    if i >= len(tokens) or tokens[i] != "{":
        return i
    depth = 0
    for j in range(i, len(tokens)):
        depth += {"{": 1, "}": -1}.get(tokens[j], 0)
        if depth == 0:
            return j + 1
    return len(tokens)


def _read(text: str) -> tuple[set[str], set[str]]:
    """``(symbols, words)``: the commands and characters of ``text``, and its words (letter
    runs of two or more in math, every letter run in a text wrapper; lower-cased)."""
    tokens = [_norm(t) for t in _tokens(text)]
    symbols, words = set(), set()
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if t in _TEXT_WRAPPERS and i + 1 < len(tokens) and tokens[i + 1] == "{":
            end = _group_end(tokens, i + 1)
            symbols.add(t)
            for inner in tokens[i + 2:end - 1]:
                if inner.isascii() and inner.isalpha():
                    words.add(inner.lower())
                else:
                    symbols.add(inner)
            i = end
            continue
        if t == "\\begin{array}":  # its column spec ({cc}, {r|l}) is no part of the value
            symbols.add(t)
            i = _group_end(tokens, i + 1)
            continue
        if not (t.isascii() and t.isalnum()):
            symbols.add(t)  # a command, a sign, or a character of another script
        elif t.isalpha() and len(t) > 1:
            words.add(t.lower())
        i += 1
    return symbols, words


@functools.lru_cache(maxsize=8192)  # one gold is graded against a whole group
def _allowed_for(gold: str, gold_is_list: bool, gold_is_set: bool) -> tuple[frozenset[str], ...]:
    """``(symbols, words, letters)`` an answer against ``gold`` may hold."""
    symbols, words = _read(gold)
    symbols |= _COMMANDS | _CHARS | _UNICODE
    if gold_is_list:
        symbols |= _LIST
        words |= _OR_WORDS
    if gold_is_set or symbols & _RELATIONS:
        symbols |= _SETS
    if _MATRIX_GOLD.search(gold):
        symbols |= _MATRIX
    letters = {c.lower() for c in re.sub(r"\\[A-Za-z]+", " ", gold)
               if c.isascii() and c.isalpha()}
    return frozenset(symbols), frozenset(words | _UNITS | _NAMES), frozenset(letters)


def refusal(pred: str, gold: str, gold_is_list: bool, gold_is_set: bool) -> str | None:
    """Why ``pred`` holds something no answer of ``gold``'s type may hold, or ``None``.

    ``gold_is_list``: the gold is a list or set of values; ``gold_is_set``: it is an interval
    or a set of reals (``hedge`` decides both)."""
    symbols, words, letters = _allowed_for(gold, gold_is_list, gold_is_set)
    if "_" not in gold and (why := _value_subscript(pred)):
        return why
    pred_symbols, pred_words = _read(pred)
    for s in sorted(pred_symbols - symbols):
        return f"hedge: {s!r} is not part of an answer of the gold's type"
    for w in sorted(pred_words - words):
        if not set(w) <= letters:  # a product of single-letter variables the gold uses
            return f"hedge: the word {w!r} is not part of an answer of the gold's type"
    return None


def _value_subscript(pred: str) -> str | None:
    """A subscript on a value (``42_{41}``) rather than on a name (``x_1``, ``\\log_2``)."""
    tokens = _tokens(pred)
    for i, token in enumerate(tokens):
        if token != "_":
            continue
        before = tokens[i - 1] if i else ""
        if (len(before) == 1 and before.isascii() and before.isalpha()) or \
                before in _SUBSCRIPTED or _GREEK.match(before):
            continue
        return (f"hedge: a subscript after {before!r} is not part of an answer of the gold's "
                "type (a subscript names a variable, a base or a bound; here a second value "
                "would hide in it)")
    return None
