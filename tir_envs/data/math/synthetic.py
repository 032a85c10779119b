"""Generated math problems for training, disjoint from the shipped benchmarks by construction.

Every math set the package ships (MATH-500, AIME, GSM8K) is an evaluation set, so a training
mix needs math problems of its own.  These come from templates whose parameters are drawn
from a seeded generator, with the exact answer computed here; each one is easy to state and
tedious by hand (big powers modulo m, divisor counts, binomials, sums over ranges, linear
systems), which is where running code pays.  Same ``seed`` and ``n``, same problems.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import Callable

from tir_envs.task import Task
from tir_envs.validation import check_positive_int

Problem = tuple[str, str]  # (question, exact answer as the grader reads it)


def _fraction(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"\\frac{{{x.numerator}}}{{{x.denominator}}}"


def _power_mod(rng: random.Random) -> Problem:
    a, b, m = rng.randint(3, 99), rng.randint(50, 5000), rng.randint(7, 997)
    return f"What is the remainder when ${a}^{{{b}}}$ is divided by ${m}$?", str(pow(a, b, m))


def _divisors(rng: random.Random) -> Problem:
    n = rng.randint(10_000, 9_999_999)
    count = 1
    rest, p = n, 2
    while p * p <= rest:
        e = 0
        while rest % p == 0:
            rest //= p
            e += 1
        count *= e + 1
        p += 1
    count *= 2 if rest > 1 else 1
    return f"How many positive divisors does ${n}$ have?", str(count)


def _binomial(rng: random.Random) -> Problem:
    n = rng.randint(20, 60)
    k = rng.randint(3, n // 2)
    return f"Compute $\\binom{{{n}}}{{{k}}}$.", str(math.comb(n, k))


def _range_sum(rng: random.Random) -> Problem:
    lo, hi, k = rng.randint(1, 500), rng.randint(2_000, 90_000), rng.randint(3, 41)
    total = sum(x for x in range(lo, hi + 1) if x % k == 0)
    return (f"What is the sum of all integers $x$ with ${lo} \\le x \\le {hi}$ that are "
            f"divisible by ${k}$?", str(total))


def _linear_system(rng: random.Random) -> Problem:
    while True:
        a, b, c, d = (rng.randint(-12, 12) for _ in range(4))
        if a * d - b * c:
            break
    x, y = Fraction(rng.randint(-20, 20), rng.randint(1, 6)), Fraction(rng.randint(-20, 20))
    e, f = a * x + b * y, c * x + d * y
    return (f"Solve the system ${a}x + {b}y = {_fraction(e)}$ and ${c}x + {d}y = {_fraction(f)}$. "
            "What is $x$?").replace("+ -", "- "), _fraction(x)


def _gcd_lcm(rng: random.Random) -> Problem:
    g = rng.randint(2, 60)
    a, b = g * rng.randint(100, 9_000), g * rng.randint(100, 9_000)
    return (f"What is the least common multiple of ${a}$ and ${b}$ divided by their greatest "
            "common divisor?", str(math.lcm(a, b) // math.gcd(a, b)))


def _digit_sum(rng: random.Random) -> Problem:
    n = rng.randint(30, 120)
    return f"What is the sum of the digits of ${n}!$?", str(sum(map(int, str(math.factorial(n)))))


TEMPLATES: tuple[Callable[[random.Random], Problem], ...] = (
    _power_mod, _divisors, _binomial, _range_sum, _linear_system, _gcd_lcm, _digit_sum)


def generate_math_tasks(n: int, seed: int = 0) -> list[Task]:
    """``n`` generated problems (templates in turn), ids ``synthetic-math/<seed>-<i>``."""
    check_positive_int(n=n)
    rng = random.Random(seed)
    tasks, seen = [], set()
    i = 0
    while len(tasks) < n:
        question, answer = TEMPLATES[i % len(TEMPLATES)](rng)
        i += 1
        if question in seen:
            continue
        seen.add(question)
        tasks.append(Task(id=f"synthetic-math/{seed}-{len(tasks)}", question=question,
                          answer=answer, meta={"dataset": "synthetic-math", "domain": "math",
                                               "tool": "python"}))
    return tasks
