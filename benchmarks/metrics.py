"""Benchmark metrics as pure functions of per-sample verdicts (no I/O, no env).

Definitions (docs/benchmarks.md repeats them with the report format):

* ``pass_at_k(n, c, k)``: the unbiased estimator of Chen et al. (2021), the probability that at
  least one of ``k`` samples drawn without replacement from ``n`` (``c`` correct) is correct:
  ``1 - C(n-c, k) / C(n, k)``, computed in the numerically stable product form
  ``1 - prod_{i=n-c+1..n} (1 - k/i)``.
* ``avg@k``: the mean over items of the share of an item's ``k`` samples that are correct.
* ``maj@k``: per item, the answers of the answered samples are grouped into classes of equal
  answers (``same(a, b)``: grader equivalence for math, normalised text for QA, result set for
  SQL); the largest class wins; a tie goes to the class whose first member has the lowest sample
  index; the item scores the verdict of that first member.  An item whose samples gave no answer
  scores 0.
* Confidence intervals: a percentile bootstrap over items (items resampled with replacement,
  ``resamples`` draws from a fixed seed), so it applies to every per-item score in [0, 1].
* Tool selection ``TS``: executed calls whose tool is the task's ground-truth tool, over all
  executed calls, on tasks that have one (``None`` when no such call was made).
  Tool productivity ``TP`` (AutoTIR eq. 8, per item): each episode scores
  correct / (1 + its executed tool calls), and TP is the mean over episodes, in [0, 1]: 1 when
  every answer is right without a call, 0.5 when every answer is right after one call.  (A
  ratio of a set's totals, correct / (1 + all calls), grows with the set: 25 for 25 right
  answers with no call.)
* ``permutation_test``: two-sided sign-flip test on per-item score differences, exact when the
  differences lie on a grid (shares of k samples do), else Monte Carlo with its error.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any, Callable, Hashable, Iterable, Mapping, Sequence

# ------------------------------------------------------------------------------ pass@k


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one item with ``n`` samples, ``c`` of them correct (Chen et al.)."""
    if not (isinstance(n, int) and isinstance(c, int) and isinstance(k, int)):
        raise TypeError(f"pass_at_k takes ints, got n={n!r}, c={c!r}, k={k!r}")
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def pass_at_k_closed_form(n: int, c: int, k: int) -> float:
    """``1 - C(n-c, k) / C(n, k)`` with exact integers (the reference the tests compare to)."""
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_curve(correct_counts: Sequence[int], n: int) -> dict[int, float]:
    """Mean pass@k' over items for every ``k'`` in ``1..n`` (each item has ``n`` samples)."""
    if not correct_counts:
        return {}
    return {k: mean(pass_at_k(n, c, k) for c in correct_counts) for k in range(1, n + 1)}


# ------------------------------------------------------------------------------ maj@k


def majority_vote(answers: Sequence[Any], same: Callable[[Any, Any], bool]) -> int | None:
    """The sample index whose answer class wins the vote (``None``: no sample answered).

    ``answers[i]`` is sample ``i``'s answer, ``None`` when it gave none (it does not vote).
    A sample joins the first earlier class whose first member ``same`` says it equals.  The
    largest class wins; ties go to the class whose first member came first.  The winner is
    that first member's index.
    """
    classes: list[list[int]] = []
    for i, answer in enumerate(answers):
        if answer is None:
            continue
        for members in classes:
            if same(answer, answers[members[0]]):
                members.append(i)
                break
        else:
            classes.append([i])
    if not classes:
        return None
    best = max(classes, key=lambda m: (len(m), -m[0]))
    return best[0]


def keyed_same(key: Callable[[Any], Hashable]) -> Callable[[Any, Any], bool]:
    """``same`` for answers compared through a key (normalised text, a result set)."""
    return lambda a, b: key(a) == key(b)


def maj_at_k(answers: Sequence[Any], correct: Sequence[bool],
             same: Callable[[Any, Any], bool]) -> float:
    """1.0 when the winning answer class of one item is correct (see ``majority_vote``)."""
    if len(answers) != len(correct):
        raise ValueError(f"{len(answers)} answers but {len(correct)} verdicts")
    winner = majority_vote(answers, same)
    return 0.0 if winner is None else float(bool(correct[winner]))


# ------------------------------------------------------------------------------ averages


def mean(values: Iterable[float]) -> float:
    values = list(values)
    if not values:
        raise ValueError("mean of no values")
    return float(math.fsum(values) / len(values))


def avg_at_k(per_item_correct: Sequence[Sequence[bool]]) -> float:
    """Mean over items of the share of an item's samples that are correct."""
    return mean(mean(float(bool(c)) for c in item) for item in per_item_correct)


def bootstrap_ci(scores: Sequence[float], level: float = 0.95, resamples: int = 2000,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of per-item ``scores``."""
    if not scores:
        raise ValueError("bootstrap_ci needs at least one score")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    rng = random.Random(seed)
    n = len(scores)
    means = sorted(math.fsum(rng.choices(scores, k=n)) / n for _ in range(resamples))
    lo = means[int(math.floor((1 - level) / 2 * (resamples - 1)))]
    hi = means[int(math.ceil((1 + level) / 2 * (resamples - 1)))]
    return float(lo), float(hi)


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (95% by default)."""
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"wilson_interval needs 0 <= successes <= n and n > 0; got "
                         f"{successes}/{n}")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def percentiles(values: Sequence[float], qs: Sequence[float] = (50, 90, 99)) -> dict[str, float]:
    """Nearest-rank percentiles, keyed ``p50``...; empty input gives an empty dict."""
    if not values:
        return {}
    ordered = sorted(values)
    out = {}
    for q in qs:
        rank = max(1, math.ceil(q / 100 * len(ordered)))
        out[f"p{q:g}"] = float(ordered[rank - 1])
    return out


# ------------------------------------------------------------------------------ tools


def tool_selection(episodes: Iterable[tuple[Mapping[str, int], str | None]]) -> float | None:
    """TS over episodes given as ``(tool_counts, ground_truth_tool)``.

    Episodes whose task has no ground-truth tool (open domain) are left out.  ``None`` when no
    tool was executed on the remaining ones (TS is undefined there).
    """
    right = total = 0
    for counts, truth in episodes:
        if truth is None:
            continue
        calls = sum(counts.values())
        total += calls
        right += counts.get(truth, 0)
    return right / total if total else None


def tool_productivity(episodes: Sequence[tuple[bool, int]]) -> float | None:
    """TP: the mean over ``(correct, executed tool calls)`` episodes of correct / (1 + calls)
    (module docstring); ``None`` for no episode."""
    return mean(episode_productivity(c, n) for c, n in episodes) if episodes else None


def episode_productivity(correct: bool, tool_calls: int) -> float:
    """One episode's share of TP: 1 / (1 + calls) when correct, else 0."""
    if tool_calls < 0:
        raise ValueError(f"tool_calls must be >= 0, got {tool_calls}")
    return float(bool(correct)) / (1 + tool_calls)


def calls_by_tool(counts: Sequence[Mapping[str, int]]) -> dict[str, float]:
    """Mean executed calls per episode, by tool name (0 for episodes that did not call it)."""
    if not counts:
        return {}
    total: Counter = Counter()
    for c in counts:
        total.update(c)
    return {name: total[name] / len(counts) for name in sorted(total)}


# ------------------------------------------------------------------------------ comparison


def paired_permutation_test(a: Sequence[float], b: Sequence[float], resamples: int = 10000,
                            seed: int = 0) -> float:
    """Two-sided p-value that paired per-item scores ``a`` and ``b`` have equal means
    (``permutation_test``'s p-value)."""
    return permutation_test(a, b, resamples, seed)["p_value"]


#: the largest distribution of sums the exact test builds (grid points), ~16 MB of floats
_EXACT_MAX_POINTS = 2_000_001


def permutation_test(a: Sequence[float], b: Sequence[float], resamples: int = 10000,
                     seed: int = 0) -> dict[str, Any]:
    """The paired sign-flip test, exact whenever feasible: ``{p_value, method, mc_error}``.

    Under the null the sign of each item's difference is exchangeable; the statistic is
    ``|sum(d)|``.  Per-item scores are shares of k samples, so the differences lie on a grid
    of step ``1/L`` (L the common denominator, found from the values): the null distribution
    of the sum is then built exactly by convolving each item's two signs (``method="exact"``,
    ``mc_error=0``).  Off a grid, at most 16 non-zero differences are enumerated; otherwise
    ``resamples`` random flips from a fixed seed give an add-one estimate with its Monte Carlo
    standard error ``sqrt(p(1-p)/resamples)`` (``method="monte carlo"``).
    """
    if len(a) != len(b):
        raise ValueError(f"paired scores differ in length: {len(a)} vs {len(b)}")
    diffs = [x - y for x, y in zip(a, b) if x != y]
    if not diffs:
        return {"p_value": 1.0, "method": "exact", "mc_error": 0.0}
    steps = _on_grid(diffs)
    if steps is not None and 2 * sum(abs(s) for s in steps) + 1 <= _EXACT_MAX_POINTS:
        return {"p_value": _exact_sign_flip(steps), "method": "exact", "mc_error": 0.0}
    observed = abs(math.fsum(diffs)) - 1e-12
    if len(diffs) <= 16:
        hits = 0
        for mask in range(1 << len(diffs)):
            s = math.fsum(d if mask >> i & 1 else -d for i, d in enumerate(diffs))
            hits += abs(s) >= observed
        return {"p_value": hits / (1 << len(diffs)), "method": "exact", "mc_error": 0.0}
    rng = random.Random(seed)
    hits = sum(abs(math.fsum(d if rng.random() < 0.5 else -d for d in diffs)) >= observed
               for _ in range(resamples))
    p = (hits + 1) / (resamples + 1)
    return {"p_value": p, "method": "monte carlo",
            "mc_error": math.sqrt(p * (1 - p) / resamples)}


def _on_grid(values: Sequence[float], max_denominator: int = 4096) -> list[int] | None:
    """``values`` as integer multiples of one step ``1/L`` (``None`` when they are not)."""
    from fractions import Fraction

    fracs = [Fraction(v).limit_denominator(max_denominator) for v in values]
    if any(abs(float(f) - v) > 1e-9 for f, v in zip(fracs, values)):
        return None
    lcm = math.lcm(*(f.denominator for f in fracs))
    return [int(f * lcm) for f in fracs]


def _exact_sign_flip(steps: Sequence[int]) -> float:
    """P(|sum of ±steps| >= |sum(steps)|) with each sign a fair coin, by convolution."""
    import numpy as np

    total = sum(abs(s) for s in steps)
    dist = np.zeros(2 * total + 1)
    dist[total] = 1.0
    for s in (abs(x) for x in steps):
        shifted = np.zeros_like(dist)
        shifted[s:] += 0.5 * dist[:-s]
        shifted[:-s] += 0.5 * dist[s:]
        dist = shifted
    observed = abs(sum(steps))
    sums = np.abs(np.arange(-total, total + 1))
    return float(min(1.0, dist[sums >= observed].sum()))
