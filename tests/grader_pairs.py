"""Grader test pairs built from the shipped benchmarks: real gold answers, predictions rewritten
into other but equal forms (positives) or into near-misses (negatives).

Each pair is ``(rule, pred, gold, expected)``.  Rules name the rewriting, so a failure says which
kind of equivalence broke.
"""

from __future__ import annotations

import re
from fractions import Fraction

from tir_envs.data.math import load_math_tasks

_INT = re.compile(r"-?\d+")
_FRAC = re.compile(r"(-?)\\frac\{(\d+)\}\{(\d+)\}")
_TUPLE = re.compile(r"\((-?\d+(?:,\s*-?\d+)+)\)")
_DEG = re.compile(r"(\d+)\^\\circ")


def _answers(name: str) -> list[str]:
    return [t.answer for t in load_math_tasks(name)]


def _terminating(f: Fraction) -> bool:
    d = f.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1


def _take(items, n):
    seen, out = set(), []
    for x in items:
        if x not in seen:
            seen.add(x)
            out.append(x)
        if len(out) == n:
            break
    return out


def positive_pairs() -> list[tuple[str, str, str, bool]]:
    math500, gsm8k = _answers("math500"), _answers("gsm8k")
    aime = _answers("aime2024") + _answers("aime2025")
    ints = _take((a for a in math500 if _INT.fullmatch(a) and not a.startswith("-")), 12)
    out: list[tuple[str, str, str, bool]] = []
    big = _take((a for a in gsm8k if int(a) >= 1000), 12)
    out += [("thousands separator", f"{int(a):,}", a, True) for a in big]
    out += [("latex thousands", f"{int(a):,}".replace(",", "{,}"), a, True) for a in big[:4]]
    out += [("dollars and cents", f"\\${a}.00", a, True) for a in _take(gsm8k, 8)]
    out += [("x = n", f"x = {a}", a, True) for a in ints[:6]]
    out += [("n = value", f"n={a}", a, True) for a in aime[:6]]
    out += [("units in text", f"{a}\\text{{ cm}}", a, True) for a in ints[6:10]]
    out += [("units in mbox", f"{a} \\mbox{{ inches}}", a, True) for a in ints[10:12]]
    out += [("percent sign", f"{a}\\%", a, True) for a in aime[6:9]]
    for gold in _take((a for a in math500 if _DEG.fullmatch(a)), 8):
        n = _DEG.fullmatch(gold).group(1)
        out += [("degrees dropped", n, gold, True), ("degrees braced", f"{n}^{{\\circ}}", gold, True)]
    for gold in _take((a for a in math500 if _FRAC.fullmatch(a)), 12):
        sign, p, q = _FRAC.fullmatch(gold).groups()
        out += [("dfrac", f"{sign}\\dfrac{{{p}}}{{{q}}}", gold, True),
                ("slash fraction", f"{sign}{p}/{q}", gold, True)]
        f = Fraction(int(p), int(q))
        if _terminating(f):
            out.append(("decimal", f"{sign}{float(f)!r}", gold, True))
    texts = [a for a in math500 if a.startswith("\\text{") and a.endswith("}")]
    for gold in _take(texts, 8):
        inner = gold[len("\\text{"):-1]
        out.append(("text unwrapped", inner, gold, True))
        if inner.startswith("(") and inner.endswith(")"):
            out.append(("choice letter", inner.strip("()"), gold, True))
    for gold in _take((a for a in math500 if _TUPLE.fullmatch(a.replace(" ", ""))), 6):
        items = [x.strip() for x in gold.strip("()").split(",")]
        out.append(("tuple with left/right", "\\left( " + ", ".join(items) + " \\right)", gold,
                    True))
    out += [
        ("tuple of fractions", "\\left( 3/2, -13 \\right)", "\\left( \\frac{3}{2}, -13 \\right)",
         True),
        ("polar tuple", "(3, \\pi/2)", "\\left( 3, \\frac{\\pi}{2} \\right)", True),
        ("interval spacing", "\\left(2, \\infty\\right)", "(2,\\infty)", True),
        ("interval spacing", "(3, 4]", "(3,4]", True),
        ("interval spacing", "(-\\infty,0]", "(-\\infty, 0]", True),
        ("half-open interval", "\\left( \\frac35, \\frac83 \\right]",
         "\\left(\\frac{3}{5},\\frac{8}{3}\\right]", True),
        ("interval as set", "(5, \\infty)", "(5,\\infty)", True),
        ("list reordered", "7, 5, 3", "3, 5, 7", True),
        ("list as set", "\\{3, 5, 7\\}", "3, 5, 7", True),
        ("list reordered", "-2, 1", "1,-2", True),
        ("set reordered", "\\{-2, 1 \\pm \\sqrt{5}\\}", "\\{1\\pm\\sqrt{5},-2\\}", True),
        ("sqrt over integer", "\\sqrt{3}/3", "\\frac{\\sqrt{3}}{3}", True),
        ("sqrt braces", "11\\sqrt{2}", "11\\sqrt2", True),
        ("sqrt product", "3\\cdot\\sqrt{13}", "3\\sqrt{13}", True),
        ("rationalised", "\\frac{1}{\\sqrt{3}}", "\\frac{\\sqrt{3}}{3}", True),
        ("decimal as fraction", "\\frac{5}{4}", "1.25", True),
        ("decimal as fraction", "\\frac{3}{20}", "0.15", True),
        ("decimal as fraction", "\\frac{9}{2}", "4.5", True),
        ("complex reordered", "-5i + 6", "6 - 5i", True),
        ("complex reordered", "7i - 2", "-2 + 7i", True),
        ("line rearranged", "y=3+2x", "y = 2x + 3", True),
        ("polynomial reordered", "-1 + x - x^2 + x^3 - x^4 + x^5",
         "x^5 - x^4 + x^3 - x^2 + x - 1", True),
        ("matrix spacing", "\\begin{pmatrix}-2\\\\-14\\\\-7\\end{pmatrix}",
         "\\begin{pmatrix} -2 \\\\ -14 \\\\ -7 \\end{pmatrix}", True),
        ("matrix fractions", "\\begin{pmatrix} -\\frac{1}{3} \\\\ \\frac{2}{3} \\\\ \\frac{5}{3} "
         "\\end{pmatrix}", "\\begin{pmatrix} -1/3 \\\\ 2/3 \\\\ 5/3 \\end{pmatrix}", True),
        ("pi multiple", "-\\pi/6", "-\\frac{\\pi}{6}", True),
        ("degree word units", "\\frac{270}{7}", "\\frac{270}7\\text{ degrees}", True),
        ("cents units", "5.4", "5.4 \\text{ cents}", True),
    ]
    return out


def negative_pairs() -> list[tuple[str, str, str, bool]]:
    math500, gsm8k = _answers("math500"), _answers("gsm8k")
    ints = _take((a for a in math500 if _INT.fullmatch(a)), 8)
    out: list[tuple[str, str, str, bool]] = []
    out += [("off by one", str(int(a) + 1), a, False) for a in ints]
    out += [("x = wrong", f"x = {int(a) - 1}", a, False) for a in ints[:4]]
    big = _take((a for a in gsm8k if int(a) >= 1000), 4)
    out += [("thousands of another number", f"{int(a) + 1:,}", a, False) for a in big]
    for gold in _take((a for a in math500 if _FRAC.fullmatch(a)), 6):
        sign, p, q = _FRAC.fullmatch(gold).groups()
        if p != q:
            out.append(("fraction inverted", f"{sign}\\frac{{{q}}}{{{p}}}", gold, False))
    for gold in _take((a for a in math500 if _DEG.fullmatch(a)), 4):
        n = int(_DEG.fullmatch(gold).group(1))
        out.append(("other angle", f"{n + 10}^\\circ", gold, False))
    out += [
        ("tuple swapped", "(-1,6)", "(6,-1)", False),
        ("tuple swapped", "(1,-2)", "(-2,1)", False),
        ("tuple element wrong", "(6,31,1)", "(6,31,-1)", False),
        ("interval closure", "[3,4]", "(3,4]", False),
        ("interval closure", "(-\\infty, 0)", "(-\\infty, 0]", False),
        ("interval endpoint", "(3,\\infty)", "(2,\\infty)", False),
        ("list element missing", "3, 5", "3, 5, 7", False),
        ("list element wrong", "1, 2", "1,-2", False),
        ("sign flipped", "\\sqrt{3}", "-\\sqrt{3}", False),
        ("sqrt wrong", "\\sqrt{15}", "\\sqrt{51}", False),
        ("other name", "\\text{Navin}", "\\text{Evelyn}", False),
        ("other choice", "\\text{(B)}", "\\text{(C)}", False),
        ("other word", "odd", "\\text{even}", False),
        ("complex conjugate", "6 + 5i", "6 - 5i", False),
        ("line slope", "y = 3x + 2", "y = 2x + 3", False),
        ("decimal close but wrong", "1.26", "1.25", False),
        ("matrix entry", "\\begin{pmatrix} -2 \\\\ -14 \\\\ 7 \\end{pmatrix}",
         "\\begin{pmatrix} -2 \\\\ -14 \\\\ -7 \\end{pmatrix}", False),
        ("pi fraction", "\\frac{\\pi}{6}", "-\\frac{\\pi}{6}", False),
        ("empty box", "", "5", False),
    ]
    return out


# ---------------------------------------------------------------------------- issue 14 classes
# (pred, gold, expected, note).  "MV:" notes a verdict Math-Verify's own test suite publishes
# for the same pair (github.com/huggingface/Math-Verify, tests/); "MV-like:" a published case of
# the same shape.  Predictions are what a tool-integrated model boxes: often what `print` showed.
CLASS_CASES: dict[str, list[tuple[str, str, bool, str]]] = {
    "code-style": [
        ("7*pi", "7\\pi", True, "issue 14: pi read as p*i"),
        ("-pi/6", "-\\frac{\\pi}{6}", True, "issue 14"),
        ("x**3+3*x-6", "x^3+3x-6", True, "issue 14: ** not parsed"),
        ("x**3 + 3*x - 6", "x^3 + 3x - 6", True, "spacing"),
        ("3*sqrt(13)", "3\\sqrt{13}", True, "MV: $3\\sqrt{13}$ solution case"),
        ("sqrt(2)/2", "\\frac{\\sqrt{2}}{2}", True, ""),
        ("2*sqrt(3)/3", "\\frac{2\\sqrt3}{3}", True, ""),
        ("Rational(1, 3)", "\\frac{1}{3}", True, "SymPy repr"),
        ("-Rational(7, 4)", "-\\frac74", True, ""),
        ("exp(2)", "e^{2}", True, ""),
        ("2*E", "2e", True, "E is Euler's number in code"),
        ("E**2 - 1", "e^2-1", True, ""),
        ("oo", "\\infty", True, ""),
        ("Interval.open(-oo, 2)", "(-\\infty, 2)", True, "SymPy interval"),
        ("Union(Interval.open(-oo, 1), Interval(3, oo))", "(-\\infty,1)\\cup[3,\\infty)", True,
         "SymPy union, closed end at 3"),
        ("{x: 2}", "2", True, "SymPy solve dict"),
        ("{x: 2}", "x = 2", True, ""),
        ("[(1, 2)]", "(1, 2)", True, "SymPy solve list of tuples"),
        ("[(2, 2), (6, 2)]", "(2, 2), (6, 2)", True, ""),
        ("FiniteSet(1, 2)", "\\{1, 2\\}", True, ""),
        ("6.72e-05", "0.0000672", True, "Python float print"),
        ("2**(1/3)", "\\sqrt[3]{2}", True, ""),
        ("3 + 2*I", "3+2i", True, "I is the imaginary unit in code"),
        ("π/2", "\\frac{\\pi}{2}", True, "unicode"),
        # Negatives: the rewrite keeps values; a wrong answer stays wrong.
        ("7*pi", "7", False, "brief: 7*pi vs 7"),
        ("7*pi", "7\\pi^2", False, ""),
        ("x**3+3*x-6", "x^3+3x+6", False, ""),
        ("x**2", "2x", False, "** is a power, not a product"),
        ("2**10", "210", False, "digits never merge"),
        ("3*sqrt(13)", "\\sqrt{39}", False, ""),
        ("Rational(1, 3)", "3", False, ""),
        ("Rational(1, 3)", "0.333", False, "1/3 vs a 3-digit decimal"),
        ("{x: 2}", "3", False, ""),
        ("[(1, 2)]", "(2, 1)", False, ""),
        ("Interval.open(-oo, 2)", "(-\\infty, 2]", False, "closure matters"),
        ("exp(2)", "2e", False, ""),
        ("E", "e", True, "MV reads a lone E as e; code rules leave it alone"),
        ("6.72e-05", "0.0000673", False, "relative tolerance"),
        ("oo", "-\\infty", False, ""),
    ],
    "quick path never overrules": [
        ("32, 349", "32349", False, "issue 14: was accepted by the shortcut"),
        ("0,111", "111", False, "issue 14: was read as the integer 111"),
        ("0,111", "0.111", True, "MV: ('0,111', '0.111') -> 1"),
        ("32,349", "32349", True, "MV-like: ('7425000', '7,425,000') -> 1"),
        ("7,425,000", "7425000", True, "MV: ('7425000', '7,425,000') -> 1"),
        ("1,000", "1000", True, ""),
        ("1 000", "1000", True, "MV: ('1000', '1 000') -> 1"),
        ("1000.0", "1000", True, "MV: ('1000', '1000.0') -> 1"),
        ("12, 345", "12345", False, "a comma and a space separate two numbers"),
        ("1,2345", "12345", False, "not a thousands group"),
        ("-5", "-5", True, "MV: ('-5', '-5') -> 1"),
        (".4", "0.4", True, "MV: ('0.4', '.4') -> 1"),
        ("10/9", "\\frac{10}{9}", True, "MV: ('10/9', '\\\\frac{10}{9}') -> 1"),
        ("-10/9", "-\\frac{10}{9}", True, "MV: ('-10/9', '-\\\\frac{10}{9}') -> 1"),
    ],
    "multiple boxes": [  # pred is a response; the final answer is extracted from it
        ("so \\boxed{-2} \\quad\\text{and}\\quad \\boxed{1}", "1,-2", True, "issue 14"),
        ("$\\boxed{-2}$ and $\\boxed{1}$.", "1, -2", True,
         "MV: 'The integers are \\\\boxed{-2} and \\\\boxed{1}' vs 'n = \\\\boxed{1,-2}' -> 1"),
        ("\\boxed{(2, 2)} and \\boxed{(6, 2)}", "(2, 2), (6, 2)", True, "issue 14: tuples"),
        ("$x = \\boxed{3}$, $x = \\boxed{-3}$", "\\{3, -3\\}", True, "a set gold"),
        ("\\boxed{1}, \\boxed{2}, \\boxed{3}", "{1,2,3}", True,
         "MV: ('{1,2,3}', '\\\\boxed{1},\\\\boxed{2},\\\\boxed{3}') -> 1"),
        ("\\boxed{1+\\sqrt{19}} and \\boxed{1-\\sqrt{19}}", "1 \\pm \\sqrt{19}", True, "\\pm gold"),
        # Attacks: several candidates never pay against a single value, and a set must be equal.
        ("\\boxed{1} \\boxed{2}", "2", False, "issue 21: two candidates are a hedge"),
        ("\\boxed{2} \\boxed{1}", "2", False, "single-valued gold: only the last box counts"),
        ("\\boxed{1} \\boxed{2} \\boxed{3} \\boxed{4}", "2", False, "boxing candidates"),
        ("\\boxed{1}, \\boxed{-2}, \\boxed{5}", "1,-2", False, "a superset is not the set"),
        ("\\boxed{1}", "1,-2", False, "a subset is not the set"),
        ("\\boxed{-2}. Then, after more work, we find \\boxed{1}", "1,-2", False,
         "a box before other text is working, not the final answer"),
        ("\\boxed{(2, 2)} and \\boxed{(6, 2)}", "(6, 2)", False, "issue 21: a hedge"),
        ("\\boxed{2} and \\boxed{2.0}", "2", True, "one value boxed twice"),
        ("\\boxed{(6, 2)} and \\boxed{(2, 2)}", "(6, 2)", False, "a point gold: the last box"),
        ("\\boxed{58} and \\boxed{500}", "58,500", False, "58,500 is one number"),
        ("\\boxed{[-1, 1]}", "-1, 1", True, "a Python list against a list gold"),
        ("\\boxed{[-1, 1]}", "[-1, 1]", True, "an interval gold stays an interval"),
        ("\\boxed{[-1, 2]}", "-1, 1", False, ""),
        ("\\boxed{[-1, 1]}", "1", False, "a list against a single value"),
        ("\\boxed{[-1, 1]}", "(-1, 1)", False, "a point or open interval is not the list"),
        ("\\boxed{[-1, 1, 2]}", "-1, 1", False, "a superset"),
    ],
    "decimals and integers": [
        (".0000673", ".0000672", False, "issue 14: 6-decimal rounding accepted it"),
        (".0000672", "6.72 \\times 10^{-5}", True, ""),
        ("0.0833333333333333", "\\frac{1}{12}", True,
         "MV: ('$\\\\frac{1}{12}$', '$0.0833333333333333$') -> 1"),
        ("(1, 4.5)", "(1,\\frac{9}{2})", True, "MV: ('$(1,\\\\frac{9}{2})$', '$(1,4.5)$') -> 1"),
        ("4.123105625617661", "\\sqrt{17}", True, "MV-like: sqrt(17) to 15 decimals -> 1"),
        ("0.3333333", "\\frac{1}{3}", True, "within 1e-6 relative"),
        ("0.333", "\\frac{1}{3}", False, "a rounded decimal is not the exact answer"),
        ("0.3333", "\\frac{1}{3}", False, "MV: 1 with precision=4; differs by design"),
        ("3.0", "3", True, "an integer written with .0"),
        ("3.0000001", "3", False, "integers are exact"),
        ("2.9999999999999996", "3", False, "integers are exact (float noise too)"),
        ("123456789012", "123456789013", False, "integers are exact at any size"),
        ("6.2831853", "2\\pi", True, "a decimal of a constant, within 1e-6"),
        ("6.28", "2\\pi", False, ""),
        ("1.26", "1.25", False, ""),
        ("\\begin{pmatrix}0.5\\\\0.25\\end{pmatrix}",
         "\\begin{pmatrix}\\frac12\\\\\\frac14\\end{pmatrix}", True, "inside a matrix"),
        ("(1, 4.5001)", "(1,\\frac{9}{2})", False, "inside a tuple"),
    ],
    "assignments and words": [
        ("x = 58,500", "58,500", True, "issue 14"),
        ("x=58{,}500", "58500", True, ""),
        ("x = 58,501", "58,500", False, ""),
        ("\\text{The answer is } \\frac12", "\\frac{1}{2}", True, "issue 14"),
        ("\\text{The final answer is: } 7", "7", True, ""),
        ("\\text{Answer: 12}", "12", True, ""),
        ("The answer is 7", "7", True, ""),
        ("\\text{The answer is } \\frac13", "\\frac{1}{2}", False, ""),
        ("k = \\frac{1}{3}", "1/3", True, "MV: ('$1/3$', '$k = \\\\frac{1}{3}$') -> 1"),
        ("\\frac{1}{3} \\text{meters}", "1/3", True, "MV: ('$1/3$', '$\\\\frac{1}{3} \\\\text{meters}$') -> 1"),
    ],
}

# Responses without a box, for the opt-in fallback extraction: (response, expected answer).
FALLBACK_CASES: list[tuple[str, str | None]] = [
    ("We compute it. The final answer is $9$.", "9"),
    ("Final Answer: The final answer is $28 \\%$. I hope it is correct.", "28 \\%"),
    ("Final Answer: The largest $n$ is 34.", "34"),
    ("The final answer is 42. I checked it twice.", "42"),
    ("So $x = 2$ and the area is $\\frac{1}{2}$.", "\\frac{1}{2}"),
    ("Thus the roots are $1$ and $2$.", "2"),
    ("The sum is $3.5$ exactly", "3.5"),
    ("We found $x = 3$ earlier.\nHope this helps!", None),
    ("Answer $ \n 9 \n $", None),                 # MV: inline math does not span lines
    ("Answer $$ \n 9 \n $$", "9"),                 # MV: display math may
    ("Answer $ \\frac{1}{2} \\$ = \\frac{10}{9} $", "\\frac{1}{2} \\$ = \\frac{10}{9}"),
    ("no math at all", None),
    ("first \\boxed{5}. The final answer is $6$.", "5"),  # a box comes first
]
