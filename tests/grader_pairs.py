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
