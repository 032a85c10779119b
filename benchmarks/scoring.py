"""From ``samples.jsonl`` records to a suite's metrics (definitions in ``tir_envs.bench.metrics``).

``score(records, scoring, k)`` takes the records of one part (or suite) and returns the
metrics as a JSON-ready dict.  Only items with all ``k`` samples count; ``items`` says how
many that was.  How answers are grouped for maj@k depends on ``scoring`` (``same_answer``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Iterable, Sequence

from tir_envs.bench import metrics as m
from tir_envs.bench.judging import judge_summary

Record = dict[str, Any]


# ------------------------------------------------------------------------------ maj@k
def same_answer(scoring: str, record: Record) -> Callable[[str, str], bool] | None:
    """How two answers of ``record``'s item are compared for maj@k (``None``: no maj@k)."""
    if scoring == "math":
        from tir_envs.rewards.math import is_equivalent
        return lambda a, b: a == b or is_equivalent(a, b)
    if scoring == "qa":
        from tir_envs.rewards.qa import normalize_answer
        return m.keyed_same(normalize_answer)
    if scoring == "choice":
        return m.keyed_same(lambda a: a.strip().upper())
    if scoring == "sql":
        db = record["meta"].get("db_path")
        return lambda a, b: a.strip() == b.strip() or _same_result(a, b, db)
    return None


def _same_result(a: str, b: str, db: str | None) -> bool:
    """Whether two queries return the same result set (the execution-match rules)."""
    if db is None:
        return False
    from tir_envs.rewards.sql import execution_match
    try:
        return execution_match(a, b, db)
    except Exception:  # noqa: BLE001 - b failing to run is a different answer, not an error
        return False


# ------------------------------------------------------------------------------ grouping
def by_item(records: Iterable[Record], k: int) -> list[list[Record]]:
    """Complete items (all ``k`` samples), each a list of records in sample order."""
    items: dict[int, dict[int, Record]] = defaultdict(dict)
    for r in records:
        items[r["item"]][r["sample"]] = r
    return [[s[i] for i in range(k)] for _, s in sorted(items.items())
            if all(i in s for i in range(k))]


# ------------------------------------------------------------------------------ metrics
def score(records: Sequence[Record], scoring: str, k: int) -> dict[str, Any]:
    """All metrics of one part or suite (see the module docstring)."""
    items = by_item(records, k)
    flat = [r for item in items for r in item]
    out: dict[str, Any] = {"scoring": scoring, "k": k, "items": len(items), "samples": len(flat)}
    judged = judge_summary(flat)
    if judged is not None:  # judge calls, tokens, cache use: the judge's cost in the report
        out["judge"] = judged
    if not items:
        return out
    per_item = [m.mean(float(r["correct"]) for r in item) for item in items]
    out["avg_at_k"] = m.mean(per_item)
    out["avg_at_k_ci"] = list(m.bootstrap_ci(per_item))
    counts = [sum(bool(r["correct"]) for r in item) for item in items]
    out["pass_at_k"] = {str(j): v for j, v in m.pass_curve(counts, k).items()}
    # the same bootstrap over items as avg@k's, for the pass@j the report shows
    out["pass_at_k_ci"] = {str(j): list(m.bootstrap_ci([m.pass_at_k(k, c, j) for c in counts]))
                           for j in range(1, k + 1) if shown_k(j, k)}
    same = same_answer(scoring, items[0][0])
    if same is not None:
        maj = [m.maj_at_k([r["answer"] if r["answered"] else None for r in item],
                          [r["correct"] for r in item],
                          same_answer(scoring, item[0])) for item in items]
        out["maj_at_k"] = m.mean(maj)
        out["maj_at_k_ci"] = list(m.wilson_interval(int(sum(maj)), len(maj)))
    if scoring == "qa" and judged is None:  # a judged suite's verdict is the judge's
        for name in ("em", "f1"):
            scores = [m.mean(float(r["components"].get(name, 0.0)) for r in item)
                      for item in items]
            out[name] = m.mean(scores)
            out[f"{name}_ci"] = list(m.bootstrap_ci(scores))
    if scoring == "ifeval":
        out["ifeval"] = ifeval_accuracies(flat)
    out["no_answer"] = m.mean(float(not r["answered"]) for r in flat)
    out["infra_failed"] = sum(r["infra_failed"] for r in flat)
    out["tools"] = tool_metrics(flat)
    out["cost"] = cost_metrics(flat)
    out["per_item"] = per_item
    return out


def shown_k(j: int, k: int) -> bool:
    """The pass@j a report shows (and bootstraps): powers of two and k itself."""
    return j == k or j & (j - 1) == 0


def breakdown(records: Sequence[Record], k: int, field: str) -> dict[str, dict[str, Any]]:
    """avg@k (with its interval) and pass@k by the value of the task field ``field`` (MATH-500's
    ``level`` or ``subject``, ``--by FIELD``); items without the field are left out."""
    groups: dict[Any, list[Record]] = defaultdict(list)
    for r in records:
        if field in r["meta"]:
            groups[r["meta"][field]].append(r)
    out = {}
    for value in sorted(groups, key=lambda v: (not isinstance(v, (int, float)), v if isinstance(
            v, (int, float)) else str(v))):
        items = by_item(groups[value], k)
        if not items:
            continue
        per_item = [m.mean(float(r["correct"]) for r in item) for item in items]
        counts = [sum(bool(r["correct"]) for r in item) for item in items]
        out[str(value)] = {"items": len(items), "avg_at_k": m.mean(per_item),
                           "avg_at_k_ci": list(m.bootstrap_ci(per_item)),
                           "pass_at_k": m.mean(m.pass_at_k(k, c, k) for c in counts)}
    return out


def replicate(records: Sequence[Record], k: int, index: int) -> list[Record]:
    """The records of seed replicate ``index`` (samples ``index*k .. index*k + k-1``), with
    their samples numbered from 0 as a single-seed run numbers them."""
    lo = index * k
    return [{**r, "sample": r["sample"] - lo} for r in records if lo <= r["sample"] < lo + k]


def seed_spread(records: Sequence[Record], scoring: str, k: int, seeds: int) -> dict[str, Any]:
    """avg@k, pass@k and maj@k of every seed replicate, with their mean, standard deviation
    (n - 1) and range: how much a figure moves with the sampling seed alone."""
    per_seed = [score(replicate(records, k, i), scoring, k) for i in range(seeds)]
    complete = [s for s in per_seed if s.get("items")]
    out: dict[str, Any] = {"seeds": seeds, "complete": len(complete)}
    if not complete:
        return out
    series = {"avg_at_k": [s["avg_at_k"] for s in complete],
              "pass_at_k": [s["pass_at_k"][str(k)] for s in complete]}
    if all("maj_at_k" in s for s in complete):
        series["maj_at_k"] = [s["maj_at_k"] for s in complete]
    for name, values in series.items():
        mu = m.mean(values)
        sd = (sum((v - mu) ** 2 for v in values) / (len(values) - 1)) ** 0.5 \
            if len(values) > 1 else 0.0
        out[name] = {"mean": mu, "std": sd, "min": min(values), "max": max(values),
                     "per_seed": values}
    return out


def ifeval_accuracies(records: Sequence[Record]) -> dict[str, float]:
    """IFEval's four accuracies (and AutoTIR's soft ones) over every sample's response."""
    from tir_envs.rewards.ifeval import aggregate, score_response

    verdicts = [score_response(r["answer"] or "", r["meta"]["instruction_id_list"],
                               r["meta"].get("kwargs")) for r in records]
    return aggregate(verdicts).as_dict()


def tool_metrics(records: Sequence[Record]) -> dict[str, Any]:
    """Calls per episode by tool, share of episodes with a call, TS, TP, invalid/error rates."""
    executed = sum(r["tool_calls"] for r in records)
    attempts = sum(r["call_attempts"] for r in records)
    correct = sum(bool(r["correct"]) for r in records)
    truth = [(r["tool_counts"], r["meta"].get("tool")) for r in records]
    return {
        "calls_per_episode": m.mean(r["tool_calls"] for r in records),
        "calls_by_tool": m.calls_by_tool([r["tool_counts"] for r in records]),
        "episodes_with_tool": m.mean(float(r["tool_calls"] > 0) for r in records),
        "ts": m.tool_selection(truth),
        "tp": m.tool_productivity([(r["correct"], r["tool_calls"]) for r in records]),
        "invalid_call_rate": sum(r["invalid_calls"] for r in records) / attempts
        if attempts else None,
        "tool_error_rate": sum(r["tool_errors"] for r in records) / executed if executed else None,
        "infra_error_calls": sum(r["infra_errors"] for r in records),
        # the counts behind TS and TP, so they can be pooled over several parts
        "counts": {"episodes": len(records), "correct": correct, "calls": executed,
                   "tp_sum": sum(m.episode_productivity(r["correct"], r["tool_calls"])
                                 for r in records),
                   "ts_calls": sum(sum(c.values()) for c, t in truth if t is not None),
                   "ts_right": sum(c.get(t, 0) for c, t in truth if t is not None)},
    }


def cost_metrics(records: Sequence[Record]) -> dict[str, dict[str, float]]:
    """Mean and percentiles of response tokens, turns, wall time, tool latency."""
    series = {"response_tokens": [r["response_tokens"] for r in records],
              "turns": [r["turns"] for r in records],
              "wall_s": [r["wall_s"] for r in records],
              "tool_latency_s": [x for r in records for x in r["tool_latency_s"]]}
    return {name: ({"mean": m.mean(v), **m.percentiles(v)} if v else {})
            for name, v in series.items()}


def accuracy_by_tool_calls(records: Sequence[Record], cap: int = 5) -> dict[str, tuple[int, float]]:
    """Episodes and accuracy by executed tool calls (``cap`` and more pooled as ``"5+"``)."""
    buckets: dict[str, list[bool]] = defaultdict(list)
    for r in records:
        n = r["tool_calls"]
        buckets[str(n) if n < cap else f"{cap}+"].append(bool(r["correct"]))
    order = [str(i) for i in range(cap)] + [f"{cap}+"]
    return {b: (len(buckets[b]), m.mean(buckets[b])) for b in order if buckets.get(b)}
