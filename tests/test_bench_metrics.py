"""Benchmark metrics: pass@k against its closed form, maj@k tie rules, TS/TP, intervals, tests."""

from __future__ import annotations

import itertools
import math

import pytest

from tir_envs.bench import metrics as m
from tir_envs.bench.records import tool_figures
from tir_envs.bench.scoring import score
from tir_envs.trajectory import Trajectory, Turn


# ------------------------------------------------------------------------------ pass@k
def _product_form(n: int, c: int, k: int) -> float:
    """Chen et al.'s numerically stable form, written out independently."""
    if n - c < k:
        return 1.0
    return 1.0 - float(math.prod(1.0 - k / i for i in range(n - c + 1, n + 1)))


def _by_enumeration(n: int, c: int, k: int) -> float:
    """The definition: share of k-subsets of the n samples holding a correct one."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 11))
def test_pass_at_k_matches_closed_form_product_form_and_definition(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            got = m.pass_at_k(n, c, k)
            assert got == pytest.approx(m.pass_at_k_closed_form(n, c, k), abs=1e-12)
            assert got == pytest.approx(_product_form(n, c, k), abs=1e-12)
            if n <= 8:
                assert got == pytest.approx(_by_enumeration(n, c, k), abs=1e-12)


def test_pass_at_k_edges_and_large_n_stability():
    assert m.pass_at_k(10, 0, 5) == 0.0
    assert m.pass_at_k(10, 10, 1) == 1.0
    assert m.pass_at_k(10, 3, 1) == pytest.approx(0.3)
    # n = 1000: C(1000, 500) overflows a float; the product form does not
    assert m.pass_at_k(1000, 1, 500) == pytest.approx(0.5)
    assert m.pass_at_k(1000, 10, 500) == pytest.approx(m.pass_at_k_closed_form(1000, 10, 500))


@pytest.mark.parametrize("args", [(3, 4, 1), (3, 1, 4), (3, 1, 0), (0, 0, 1), (3, -1, 1)])
def test_pass_at_k_rejects_impossible_counts(args):
    with pytest.raises(ValueError, match="pass_at_k needs"):
        m.pass_at_k(*args)


def test_pass_curve_is_mean_over_items_for_every_k():
    curve = m.pass_curve([0, 2, 4], 4)
    assert list(curve) == [1, 2, 3, 4]
    assert curve[1] == pytest.approx((0 + 0.5 + 1) / 3)
    assert curve[4] == pytest.approx(2 / 3)
    assert all(a <= b for a, b in zip(curve.values(), list(curve.values())[1:]))


# ------------------------------------------------------------------------------ maj@k
def _eq(a, b):
    return a == b


def test_majority_vote_largest_class_wins():
    assert m.majority_vote(["1", "2", "2", "3"], _eq) == 1
    assert m.maj_at_k(["1", "2", "2"], [True, False, False], _eq) == 0.0
    assert m.maj_at_k(["1", "2", "1"], [True, False, True], _eq) == 1.0


def test_majority_vote_tie_goes_to_the_class_seen_first():
    # two classes of two: "b" appears first (sample 0), so it wins whatever is correct
    assert m.majority_vote(["b", "a", "a", "b"], _eq) == 0
    assert m.maj_at_k(["b", "a", "a", "b"], [False, True, True, False], _eq) == 0.0
    assert m.maj_at_k(["a", "b", "b", "a"], [True, False, False, True], _eq) == 1.0
    # all different: the first answer
    assert m.majority_vote(["x", "y", "z"], _eq) == 0


def test_majority_vote_ignores_unanswered_samples():
    assert m.majority_vote([None, None, "7"], _eq) == 2
    assert m.majority_vote([None, None], _eq) is None
    assert m.maj_at_k([None, None], [False, False], _eq) == 0.0
    # None never forms a class even when most samples gave no answer
    assert m.maj_at_k([None, None, None, "4"], [False, False, False, True], _eq) == 1.0


def test_majority_vote_groups_by_the_given_equivalence():
    same = m.keyed_same(lambda s: s.lower().strip())
    assert m.majority_vote(["Paris", "london", " PARIS", "London", "paris"], same) == 0
    # a class is joined through its first member: "1/2" ~ "0.5" by the supplied rule
    numeric = lambda a, b: abs(eval(a) - eval(b)) < 1e-9  # noqa: E731 - test helper
    assert m.majority_vote(["3", "1/2", "0.5", "3"], numeric) == 0  # 2 vs 2: "3" came first
    assert m.majority_vote(["1/2", "3", "0.5"], numeric) == 0


def test_maj_needs_a_verdict_per_answer():
    with pytest.raises(ValueError, match="answers but"):
        m.maj_at_k(["a"], [True, False], _eq)


# ------------------------------------------------------------------------------ tools
def _traj(calls: list[tuple[str, str, dict]]) -> Trajectory:
    """A trajectory whose one turn holds the given (tool, status, flags) call records."""
    results = []
    for i, (tool, status, flags) in enumerate(calls):
        results.append({"tool": tool, "status": status, "latency_s": 0.1 * (i + 1),
                        "chars": 3, **flags})
    return Trajectory(turns=[Turn(index=0, action_span=(0, 1), tool_results=results)])


def test_tool_figures_count_executed_calls_invalid_calls_and_errors():
    t = _traj([("search", "ok", {"executed": True}),
               ("python", "error", {"executed": True}),
               ("python", "infra_error", {"executed": True}),
               ("", "error", {"parse_error": True}),
               ("calc", "error", {"unknown_tool": True}),
               ("search", "error", {"exhausted": True})])
    f = tool_figures(t)
    assert f["tool_counts"] == {"search": 1, "python": 2}
    assert f["tool_calls"] == 3 and f["call_attempts"] == 6
    assert f["invalid_calls"] == 2 and f["tool_errors"] == 2 and f["infra_errors"] == 1
    assert f["tool_latency_s"] == pytest.approx([0.1, 0.2, 0.3])


def test_tool_selection_on_hand_built_trajectories():
    math_right = tool_figures(_traj([("python", "ok", {"executed": True})]))["tool_counts"]
    math_mixed = tool_figures(_traj([("search", "ok", {"executed": True}),
                                     ("python", "ok", {"executed": True}),
                                     ("python", "ok", {"executed": True})]))["tool_counts"]
    qa_wrong = tool_figures(_traj([("python", "ok", {"executed": True})]))["tool_counts"]
    free = tool_figures(_traj([("search", "ok", {"executed": True})]))["tool_counts"]
    unparsed = tool_figures(_traj([("search", "error", {"parse_error": True})]))["tool_counts"]
    episodes = [(math_right, "python"), (math_mixed, "python"), (qa_wrong, "search"),
                (free, None), (unparsed, "search")]
    # invocations on tasks with a ground-truth tool: 1 + 3 + 1 = 5, of which 1 + 2 match
    assert m.tool_selection(episodes) == pytest.approx(3 / 5)
    assert m.tool_selection([(free, None)]) is None          # open domain only: undefined
    assert m.tool_selection([({}, "search")]) is None        # no call made: undefined


def test_tool_productivity_is_per_episode_correct_over_one_plus_calls():
    """Issue 36 item 3: TP as AutoTIR defines it per item, so it never grows with the number
    of items (a set ratio gave 25 for 25 right answers without a call)."""
    assert m.tool_productivity([(True, 0)] * 25) == 1.0
    assert m.tool_productivity([(True, 0)] * 3) == m.tool_productivity([(True, 0)] * 300)
    assert m.tool_productivity([(True, 1), (True, 3), (False, 0)]) == \
        pytest.approx((1 / 2 + 1 / 4 + 0) / 3)
    assert m.tool_productivity([]) is None
    with pytest.raises(ValueError):
        m.episode_productivity(True, -1)


def test_calls_by_tool_averages_over_all_episodes():
    assert m.calls_by_tool([{"search": 2}, {"python": 1}, {}, {"search": 1, "python": 1}]) == {
        "python": 0.5, "search": 0.75}


# ------------------------------------------------------------------------------ intervals
def test_wilson_interval_known_values():
    lo, hi = m.wilson_interval(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-4) and hi == pytest.approx(0.5962, abs=1e-4)
    lo, hi = m.wilson_interval(10, 10)
    assert hi == pytest.approx(1.0) and lo == pytest.approx(0.7225, abs=1e-4)
    with pytest.raises(ValueError):
        m.wilson_interval(3, 2)


def test_bootstrap_interval_contains_the_mean_and_is_deterministic():
    scores = [1.0] * 30 + [0.0] * 70
    lo, hi = m.bootstrap_ci(scores)
    assert lo < 0.3 < hi and 0.18 < lo and hi < 0.42
    assert m.bootstrap_ci(scores) == (lo, hi)
    assert m.bootstrap_ci([1.0, 1.0]) == (1.0, 1.0)


def test_percentiles_nearest_rank():
    values = list(range(1, 101))
    assert m.percentiles(values) == {"p50": 50.0, "p90": 90.0, "p99": 99.0}
    assert m.percentiles([]) == {}


# ------------------------------------------------------------------------------ paired test
def test_paired_permutation_test_exact_small_case():
    # 4 items differ, all the same way: of 16 sign patterns only 2 reach |sum| = 4
    a = [1.0, 1.0, 1.0, 1.0, 0.5]
    b = [0.0, 0.0, 0.0, 0.0, 0.5]
    assert m.paired_permutation_test(a, b) == pytest.approx(2 / 16)
    assert m.paired_permutation_test(a, a) == 1.0


def test_paired_permutation_test_separates_real_from_no_difference():
    a = [1.0] * 60 + [0.0] * 40
    b = [0.0] * 30 + [1.0] * 30 + [0.0] * 40  # 30 items lost, none gained
    assert m.paired_permutation_test(a, b) < 0.001
    c = [1.0, 0.0] * 30 + [1.0] * 30 + [0.0] * 10  # 30 lost and 30 gained: same mean
    assert m.paired_permutation_test(a, c) > 0.5
    with pytest.raises(ValueError, match="length"):
        m.paired_permutation_test([1.0], [])


# ------------------------------------------------------------------------------ scoring
def _record(item, sample, correct, answer, calls=0):
    return {"item": item, "sample": sample, "task_id": f"t{item}", "correct": correct,
            "answered": answer is not None, "answer": answer, "meta": {"tool": "search"},
            "components": {"em": float(correct), "f1": 1.0 if correct else 0.5},
            "tool_counts": {"search": calls} if calls else {}, "tool_calls": calls,
            "call_attempts": calls, "invalid_calls": 0, "tool_errors": 0, "infra_errors": 0,
            "tool_latency_s": [0.5] * calls, "response_tokens": 10, "turns": 1 + calls,
            "wall_s": 1.0, "infra_failed": False}


def test_score_of_qa_records_end_to_end():
    records = [_record(0, 0, True, "Paris", 1), _record(0, 1, False, "Lyon", 1),
               _record(0, 2, True, "paris", 0),
               _record(1, 0, False, None), _record(1, 1, False, "Rome", 2),
               _record(1, 2, False, "rome")]
    s = score(records, "qa", 3)
    assert s["items"] == 2 and s["samples"] == 6
    assert s["avg_at_k"] == pytest.approx((2 / 3 + 0) / 2)
    assert s["pass_at_k"]["1"] == pytest.approx(1 / 3) and s["pass_at_k"]["3"] == 1 / 2
    assert s["maj_at_k"] == 0.5        # item 0: "Paris" x2 wins (correct); item 1: "Rome" wrong
    assert s["em"] == pytest.approx(1 / 3) and s["f1"] == pytest.approx((2.5 / 3 + 1.5 / 3) / 2)
    assert s["no_answer"] == pytest.approx(1 / 6)
    assert s["tools"]["calls_per_episode"] == pytest.approx(4 / 6)
    assert s["tools"]["episodes_with_tool"] == pytest.approx(3 / 6)
    # TP: (1/2 + 0 + 1 + 0 + 0 + 0) / 6 episodes
    assert s["tools"]["ts"] == 1.0 and s["tools"]["tp"] == pytest.approx(1.5 / 6)
    assert s["cost"]["tool_latency_s"]["p50"] == 0.5


def test_score_counts_only_complete_items():
    records = [_record(0, 0, True, "a"), _record(0, 1, True, "a"), _record(1, 0, True, "b")]
    s = score(records, "qa", 2)
    assert s["items"] == 1 and s["samples"] == 2


def _voter(item, sample, answer, correct, **meta):
    return {**_record(item, sample, correct, answer), "meta": meta}


def test_math_maj_groups_answers_by_grader_equivalence():
    # 1/2 written three ways outvotes a 0.25 written twice, though the first answer is 0.25
    answers = [("0.25", False), ("\\frac{1}{2}", True), ("\\frac14", False), ("0.5", True),
               ("\\dfrac{1}{2}", True)]
    records = [_voter(0, i, a, c) for i, (a, c) in enumerate(answers)]
    assert score(records, "math", 5)["maj_at_k"] == 1.0
    # by plain text every answer is its own class and the first one (0.25, wrong) wins
    assert score(records, "qa", 5)["maj_at_k"] == 0.0


def test_sql_maj_groups_queries_by_result_set():
    from tir_envs.data.spider import load_spider

    task = next(t for t in load_spider() if t.meta["db_id"] == "concert_singer")
    db = task.meta["db_path"]
    same_a = "SELECT count(*) FROM singer"
    same_b = "select COUNT(Singer_ID) from singer where 1 = 1"
    other = "SELECT count(*) FROM stadium"
    records = [_voter(0, 0, other, False, db_path=db), _voter(0, 1, same_a, True, db_path=db),
               _voter(0, 2, other, False, db_path=db), _voter(0, 3, same_b, True, db_path=db),
               _voter(0, 4, same_a, True, db_path=db)]
    assert score(records, "sql", 5)["maj_at_k"] == 1.0  # 3 queries return the singer count
    records[4] = _voter(0, 4, other, False, db_path=db)
    assert score(records, "sql", 5)["maj_at_k"] == 0.0  # now 3 return the stadium count


def test_the_permutation_test_is_exact_on_the_grid_of_shares():
    # 40 items with differences in steps of 1/4 (k = 4): past the 16 the old enumeration could
    # take, so it sampled; the convolution gives the exact tail, equal to a brute-force one
    import random as _random
    rng = _random.Random(3)
    a = [rng.randrange(5) / 4 for _ in range(40)]
    b = [rng.randrange(5) / 4 for _ in range(40)]
    out = m.permutation_test(a, b)
    assert out["method"] == "exact" and out["mc_error"] == 0.0
    diffs = [x - y for x, y in zip(a, b) if x != y]
    # exact tail by dynamic programming over integer sums, written independently
    counts = {0: 1}
    for d in diffs:
        step = round(4 * d)
        nxt: dict[int, int] = {}
        for s, c in counts.items():
            for t in (s + step, s - step):
                nxt[t] = nxt.get(t, 0) + c
        counts = nxt
    obs = abs(round(4 * sum(diffs)))
    exact = sum(c for s, c in counts.items() if abs(s) >= obs) / 2 ** len(diffs)
    assert out["p_value"] == pytest.approx(exact, rel=1e-9)
    # off any grid it samples, and says by how much the estimate may be off
    off_grid = [x + math.sqrt(2) * 1e-3 * (i + 1) for i, x in enumerate(a)]
    sampled = m.permutation_test(off_grid, b)
    assert sampled["method"] == "monte carlo" and sampled["mc_error"] > 0
    p = sampled["p_value"]
    assert sampled["mc_error"] == pytest.approx(math.sqrt(p * (1 - p) / 10000))


def test_the_avg_column_pools_tp_and_ts_over_all_episodes_instead_of_averaging_ratios():
    from tir_envs.bench.report import autotir_table

    # part a: 3 items, all right, no call (TP 1 each); part b: 1 item right with 9 calls
    # (TP 1/10): the mean of the two columns (0.55) weighs b like a; the pooled episodes give
    # (3 + 0.1) / 4
    a = [_record(i, 0, True, "x", 0) for i in range(3)]
    b = [{**_record(0, 0, True, "y", 9), "tool_counts": {"search": 6, "python": 3}}]
    suites = {"s": {"parts": {"a": score(a, "qa", 1), "b": score(b, "qa", 1)}}}
    table = autotir_table(suites)
    assert table["s/a"]["tp"] == 1.0 and table["s/b"]["tp"] == pytest.approx(0.1)
    assert table["avg"]["tp"] == pytest.approx(3.1 / 4) and table["avg"]["tp"] <= 1
    assert table["avg"]["ts"] == pytest.approx(6 / 9)  # a made no call: b's 6 of 9 right calls
    assert table["avg"]["acc"] == 1.0
