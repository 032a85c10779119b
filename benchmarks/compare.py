"""``tir-envs bench compare RUN_A RUN_B``: two runs side by side, with a paired test.

Benchmarks are keyed by (suite, part): ``math500`` under the ``math500`` suite (ToRL protocol)
and under ``autotir`` are different benchmarks and are never paired with each other.  For every
(suite, part) both runs scored, items are matched by task id; each item's score is its share of
correct samples (avg@k on one item).  The difference of the means is tested with a paired,
two-sided sign-flip permutation test on the per-item differences
(``tir_envs.bench.metrics.permutation_test``: exact when the scores lie on a grid of shares, as they
do, else Monte Carlo with its standard error shown); a difference is marked significant when
p < ``alpha`` (0.05).  Benchmarks only one run scored are listed, and settings that differ
between the runs (k, sampling, max tokens, protocol, tools) are flagged above the table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tir_envs.bench import metrics as m
from tir_envs.bench.report import benchmark_label
from tir_envs.bench.scoring import by_item
from tir_envs.bench.store import RunStore
from tir_envs.bench.suites import suite_of_run

#: settings that change what a score means; runs differing in any of them are flagged
COMPARED_SETTINGS = ("k", "seeds", "temperature", "top_p", "top_k", "max_tokens", "protocol",
                     "use_tools", "limit", "env_kwargs")

Key = tuple[str, str]  # (suite, part)


def item_scores(store: RunStore) -> dict[Key, dict[str, float]]:
    """``{(suite, part): {task_id: share of correct samples}}`` over complete items."""
    out: dict[Key, dict[str, float]] = {}
    k = store.config["k"] * store.config.get("seeds", 1)
    for name in store.config["suites"]:
        records = store.suite_records(name)
        for part in suite_of_run(name, store.config).parts:
            mine = [r for r in records if r["part"] == part.name]
            out[(name, part.name)] = {item[0]["task_id"]: m.mean(float(r["correct"]) for r in item)
                                      for item in by_item(mine, k)}
    return out


def settings_diff(a: dict[str, Any], b: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The result-changing settings on which two runs' ``run.json`` differ."""
    return {key: (a.get(key), b.get(key)) for key in COMPARED_SETTINGS
            if a.get(key, 1 if key == "seeds" else None) != b.get(key, 1 if key == "seeds"
                                                                   else None)}


def compare(run_a: str | Path, run_b: str | Path, alpha: float = 0.05) -> dict[str, Any]:
    """Rows for every (suite, part) scored by both runs, what only one scored, and the
    settings that differ (module docstring)."""
    store_a, store_b = RunStore(run_a), RunStore(run_b)
    a, b = item_scores(store_a), item_scores(store_b)
    rows = []
    for key in a:
        if key not in b:
            continue
        common = sorted(set(a[key]) & set(b[key]))
        if not common:
            continue
        xa = [a[key][t] for t in common]
        xb = [b[key][t] for t in common]
        test = m.permutation_test(xa, xb)
        rows.append({"suite": key[0], "part": key[1], "items": len(common), "a": m.mean(xa),
                     "b": m.mean(xb), "diff": m.mean(xb) - m.mean(xa), **test,
                     "significant": test["p_value"] < alpha})
    scored_a = {key for key, v in a.items() if v}
    scored_b = {key for key, v in b.items() if v}
    return {"rows": rows, "only_a": sorted(scored_a - scored_b),
            "only_b": sorted(scored_b - scored_a),
            "settings_differ": settings_diff(store_a.config, store_b.config)}


def _p(row: dict[str, Any]) -> str:
    if row["method"] == "exact":
        return f"{row['p_value']:.4f} (exact)"
    return f"{row['p_value']:.4f} ± {row['mc_error']:.4f} (Monte Carlo)"


def format_result(result: dict[str, Any], run_a: str, run_b: str) -> str:
    """A Markdown report of ``compare``'s result: warnings first, then the table."""
    lines = [f"A = {run_a}", f"B = {run_b}", ""]
    if result["settings_differ"]:
        lines.append("**Warning: the runs differ in settings that change results** "
                     "(differences below mix the effect of these with the policy's):")
        lines += [f"- {key}: A {va!r}, B {vb!r}"
                  for key, (va, vb) in sorted(result["settings_differ"].items())]
        lines.append("")
    lines += ["| benchmark | items | A (%) | B (%) | B − A | p (paired permutation) | |",
              "|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {benchmark_label(r['suite'], r['part'])} | {r['items']} | "
                     f"{100 * r['a']:.1f} | {100 * r['b']:.1f} | {100 * r['diff']:+.1f} | "
                     f"{_p(r)} | "
                     f"{'significant' if r['significant'] else 'n.s.'} |")
    if not result["rows"]:
        lines.append("| (no benchmark scored by both runs) | | | | | | |")
    for side, key in (("A", "only_a"), ("B", "only_b")):
        if result[key]:
            lines += ["", f"Scored only by {side} (not compared): "
                      + ", ".join(benchmark_label(*k) for k in result[key])]
    return "\n".join(lines)
