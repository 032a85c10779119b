"""The outputs of a run folder: ``summary.json``, ``report.md`` and PNG plots.

Everything is rebuilt from ``run.json`` and ``samples.jsonl``, so ``write_outputs`` can be run
again at any time (``tir-envs bench report RUN_DIR``).  Plots need matplotlib (the ``plots``
extra); without it the report says they were skipped.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Sequence

from tir_envs.bench.scoring import (accuracy_by_tool_calls, breakdown, score, seed_spread,
                                shown_k)
from tir_envs.bench.pins import uses_search
from tir_envs.bench.presets import TABLE_ROWS, table_rows
from tir_envs.bench.store import RunStore
from tir_envs.bench.suites import CUSTOM, suite_of_run

SUMMARY = "summary.json"
REPORT = "report.md"


def summarize(store: RunStore, by: Sequence[str] = ()) -> dict[str, Any]:
    """Metrics of every suite of the run, by part for suites with several parts; each part
    also broken down by its own fields (MATH-500: level, subject) and by ``by`` (and the
    run's ``--by``), and with the spread over seed replicates when the run has several."""
    cfg = store.config
    k = cfg["k"]
    seeds = cfg.get("seeds", 1)
    fields = list(dict.fromkeys([*cfg.get("by", []), *by]))
    suites: dict[str, Any] = {}
    for name in cfg["suites"]:
        suite = suite_of_run(name, cfg)
        records = store.suite_records(name)
        parts = {}
        for part in suite.parts:
            mine = [r for r in records if r["part"] == part.name]
            parts[part.name] = {**score(mine, part.scoring, k), "file": part.file,
                                "sha256": part.sha256, "pinned_items": part.count}
            split = {f: breakdown(mine, k, f) for f in dict.fromkeys([*part.breakdowns,
                                                                       *fields])}
            parts[part.name]["by"] = {f: v for f, v in split.items() if v}
            if seeds > 1:
                parts[part.name]["over_seeds"] = seed_spread(mine, part.scoring, k, seeds)
        entry: dict[str, Any] = {"env_id": suite.env_id,
                                 "env_kwargs": suite.make_kwargs(cfg["use_tools"],
                                                                 cfg.get("protocol")),
                                 "parts": parts}
        if uses_search(suite.env_id):
            entry["search_index"] = cfg.get("search_index") or SHIPPED_INDEX
        if len(suite.parts) > 1:
            entry["overall"] = score(records, "mixed", k)
        if cfg.get("as_served"):
            entry["as_served"] = served_drift(records)
        suites[name] = entry
    return {"config": {k_: v for k_, v in cfg.items() if k_ != "env_kwargs"} |
            {"env_kwargs": cfg.get("env_kwargs", {})},
            "suites": suites,
            "autotir_table": autotir_table(suites, cfg.get("ifeval_metric", "strict")),
            "generated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}


def served_drift(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """An as-served run's drift (``tir_envs.chat.served``): how many of the prompts the model
    was given differed from the env's ledger, by how many tokens, per episode and in total."""
    played = [r for r in records if not r["infra_failed"] and "served_turns" in r]
    tokens = [r["served_drift_tokens"] for r in played]
    return {"episodes": len(played), "drifted_episodes": sum(t > 0 for t in tokens),
            "prompts": sum(r["served_turns"] for r in played),
            "drifted_prompts": sum(r["served_drifted_turns"] for r in played),
            "drift_tokens": sum(tokens), "max_episode_drift_tokens": max(tokens, default=0),
            "mean_episode_drift_tokens": sum(tokens) / len(tokens) if tokens else None}


def autotir_table(suites: dict[str, Any], ifeval_metric: str = "strict") -> dict[str, Any]:
    """One column per benchmark (every part of every suite): accuracy, TS and TP (the layout of
    AutoTIR's main table), then ``avg``: the mean of the columns' accuracies, TS over the
    pooled calls of all columns, and TP (a per-episode score, ``tir_envs.bench.metrics``) over
    their pooled episodes: a mean of per-part figures would weigh a 30-item part like a
    1319-item one.  ``ifeval_metric="soft"``: an IFEval column's accuracy is the share of
    instructions met per response (AutoTIR's table), not the prompt-level strict verdict."""
    columns = {}
    for name, entry in suites.items():
        for part, s in entry["parts"].items():
            if s.get("items"):
                tools = s["tools"]
                acc = s["avg_at_k"]
                if ifeval_metric == "soft" and s.get("ifeval"):
                    acc = s["ifeval"]["soft"]
                columns[benchmark_label(name, part)] = {"acc": acc, "ts": tools["ts"],
                                                        "tp": tools["tp"],
                                                        "counts": tools["counts"]}
    if columns:
        pooled = {key: sum(c["counts"].get(key, 0) for c in columns.values())
                  for key in ("episodes", "correct", "calls", "ts_calls", "ts_right", "tp_sum")}
        columns["avg"] = {"acc": _mean_of([c["acc"] for c in columns.values()]),
                          "ts": pooled["ts_right"] / pooled["ts_calls"]
                          if pooled["ts_calls"] else None,
                          "tp": pooled["tp_sum"] / pooled["episodes"]
                          if pooled["episodes"] else None,
                          "counts": pooled}
    return columns


def _mean_of(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


# ------------------------------------------------------------------------------ markdown
def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def _ci(pair: list[float] | None) -> str:
    return "" if not pair else f"[{100 * pair[0]:.1f}, {100 * pair[1]:.1f}]"


def _num(x: float | None, digits: int = 2) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def render_markdown(summary: dict[str, Any], plots: list[str], plot_note: str | None) -> str:
    cfg = summary["config"]
    k = cfg["k"]
    seeds = cfg.get("seeds", 1)
    lines = ["# Benchmark report", "",
             f"Policy `{cfg.get('policy') or cfg.get('policy_name')}` · k = {k}"
             + (f" × {seeds} seeds" if seeds > 1 else "")
             + f" · temperature {cfg['temperature']} · top-p {cfg['top_p']} · seed "
             f"{cfg['seed']} · max tokens/turn "
             f"{cfg['max_tokens'] or 'env budget'} · tools "
             f"{'on' if cfg['use_tools'] else 'off (w/o tools)'}"
             + (f" · protocol {cfg['protocol']}" if cfg.get("protocol") else "")
             + (f" · first {cfg['limit']} items per part" if cfg.get("limit") else "")
             + (" · **as served** (history re-rendered by the chat template)"
                if cfg.get("as_served") else ""),
             *([f"Preset `{cfg['preset']}`: {_preset_line(cfg)}."] if cfg.get("preset") else []),
             f"Sampling: {cfg.get('sampling_note') or 'as given'}."
             + (f" Each seed is a replicate of the k samples with its own seeds; the tables "
                f"give replicate 1 (the base seed) and the spread over all {seeds}."
                if seeds > 1 else ""),
             f"Generated {summary['generated']}. Accuracies in %, 95% intervals in brackets "
             "(definitions: docs/benchmarks.md).", ""]
    lines += _policy_note(cfg, summary["suites"])
    rows = table_rows(cfg.get("preset"))
    lines += _across_section(summary["autotir_table"], k, rows)
    for name, entry in summary["suites"].items():
        kwargs = ", ".join(f"{a}={b!r}" for a, b in entry["env_kwargs"].items()
                           if a != "tokenizer")
        lines += [f"## {name}", "", f"`{entry['env_id']}`" + (f" ({kwargs})" if kwargs else ""),
                  ""]
        if entry.get("search_index"):
            lines += [f"Search index: {index_line(entry['search_index'])}.", ""]
        for part, s in entry["parts"].items():
            lines += _part_section(part, s, k, len(entry["parts"]) > 1, rows)
        if "as_served" in entry:
            lines += _served_section(entry["as_served"])
    if plots:
        lines += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    if plot_note:
        lines += [f"_{plot_note}_", ""]
    return "\n".join(lines)


#: what a search suite searches when the run names no index
SHIPPED_INDEX = {"shipped": "the HotpotQA dev-distractor context paragraphs", "num_docs": 10785}


def index_line(index: dict[str, Any]) -> str:
    """The index a search suite used, in words: where it is, what it holds, its backend."""
    where = index.get("path") or index.get("url")
    facts = [f"{index['num_docs']:,} passages" if isinstance(index.get("num_docs"), int)
             else None, index.get("backend"), index.get("faiss_index"),
             f"encoder {index['model']}" if index.get("model") else None,
             f"corpus {index['corpus']}" if index.get("corpus") else None]
    said = ", ".join(f for f in facts if f)
    if where is None:
        return f"{index.get('shipped') or index.get('object')} ({said})" if said else \
            str(index.get("shipped") or index.get("object"))
    return f"`{where}`" + (f" ({said})" if said else "")


def _across_section(table: dict[str, Any], k: int, rows: tuple[str, ...]) -> list[str]:
    """The table across benchmarks, with ``rows`` alone (a preset's: its paper's table)."""
    if not table:
        return []
    names = list(table)
    labels = {"acc": f"accuracy (avg@{k})", "ts": "TS", "tp": "TP"}
    lines = ["## Across suites", "",
             "| | " + " | ".join(n if n != "avg" else "**Avg**" for n in names) + " |",
             "|---" * (len(names) + 1) + "|"]
    lines += [f"| {labels[row]} | " + " | ".join(_pct(table[n][row]) for n in names) + " |"
              for row in rows]
    if "tp" in rows:
        lines += ["", "TP (tool productivity, AutoTIR eq. 8 per item): each episode scores "
                  "correct / (1 + its tool calls), averaged over episodes, in %: 100 = every "
                  "answer right with no call, 50 = right after one call each. Avg: accuracy "
                  "is the mean of the columns; TS and TP are those of all the columns' calls "
                  "and episodes pooled."]
    else:
        lines += ["", "Avg: the mean of the columns."]
    return lines + [""]


def _served_section(d: dict[str, Any]) -> list[str]:
    return ["### As served: drift from the ledger", "",
            "Each prompt was the conversation re-rendered by the family's chat template (as a "
            "server renders it), not the env's ledger; a drifted prompt differs from the "
            "ledger in at least one token (docs/chat_models.md).", "",
            "| episodes | drifted episodes | prompts | drifted prompts | drift tokens (total) "
            "| per episode (mean) | per episode (max) |", "|---|---|---|---|---|---|---|",
            f"| {d['episodes']} | {d['drifted_episodes']} | {d['prompts']} | "
            f"{d['drifted_prompts']} | {d['drift_tokens']} | "
            f"{_num(d['mean_episode_drift_tokens'], 1)} | {d['max_episode_drift_tokens']} |", ""]


def _policy_note(cfg: dict[str, Any], suites: dict[str, Any]) -> list[str]:
    """What a sanity policy's figures must be, said where a reader would doubt them."""
    if cfg.get("policy") != "wrong":
        return []
    ifeval = [benchmark_label(n, p) for n, e in suites.items() for p, s in e["parts"].items()
              if s.get("scoring") == "ifeval"]
    note = ("Policy `wrong` writes one fixed wrong answer (`xyzzyplugh`) to every item: every "
            "part graded against a gold answer must score 0.")
    if ifeval:
        note += (f" {', '.join(ifeval)} has no gold answer: IFEval grades whether the response "
                 "follows the prompt's instructions, and that one short, lowercase, "
                 "comma-free response does follow some of them (e.g. no commas, all "
                 "lowercase), so it scores above 0 by design.")
    return [f"_{note}_", ""]


def _part_section(part: str, s: dict[str, Any], k: int, heading: bool,
                  rows: tuple[str, ...] = TABLE_ROWS) -> list[str]:
    """One part's figures; TS and TP only where the run's table has them (``rows``)."""
    lines = [f"### {part}", ""] if heading else []
    lines.append(f"{s['items']} of {s['pinned_items']} items × {k} samples · "
                 f"`{Path(s['file']).name if Path(s['file']).is_absolute() else s['file']}` "
                 f"sha256 `{s['sha256'][:12]}…`")
    if not s.get("items"):
        return lines + ["", "No complete item yet.", ""]
    rows = [(f"avg@{k}", _pct(s["avg_at_k"]), _ci(s["avg_at_k_ci"]))]
    rows += [(f"pass@{j}", _pct(v), _ci(s.get("pass_at_k_ci", {}).get(j)))
             for j, v in s["pass_at_k"].items() if shown_k(int(j), k)]
    if "maj_at_k" in s:
        rows.append((f"maj@{k}", _pct(s["maj_at_k"]), _ci(s["maj_at_k_ci"])))
    for name in ("em", "f1"):
        if name in s:
            rows.append((name.upper(), _pct(s[name]), _ci(s[f"{name}_ci"])))
    for name, value in (s.get("ifeval") or {}).items():
        if name not in ("prompts", "instructions"):
            rows.append((f"IFEval {name.replace('_', '-')}", _pct(value), ""))
    rows.append(("no answer", _pct(s["no_answer"]), ""))
    lines += ["", "| metric | value | 95% CI |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    lines += _seed_lines(s.get("over_seeds"), k)
    for field, groups in (s.get("by") or {}).items():
        lines += ["", f"| {field} | items | avg@{k} | 95% CI | pass@{k} |",
                  "|---|---|---|---|---|"]
        lines += [f"| {value} | {g['items']} | {_pct(g['avg_at_k'])} | {_ci(g['avg_at_k_ci'])} "
                  f"| {_pct(g['pass_at_k'])} |" for value, g in groups.items()]
    t = s["tools"]
    by_tool = ", ".join(f"{n} {v:.2f}" for n, v in t["calls_by_tool"].items()) or "none"
    lines += ["", "| tools | value |", "|---|---|",
              f"| calls / episode | {t['calls_per_episode']:.2f} ({by_tool}) |",
              f"| episodes with a call | {_pct(t['episodes_with_tool'])} |",
              *([f"| TS | {_pct(t['ts'])} |"] if "ts" in rows else []),
              *([f"| TP (%) | {_pct(t['tp'])} |"] if "tp" in rows else []),
              f"| invalid calls | {_pct(t['invalid_call_rate'])} |",
              f"| tool errors | {_pct(t['tool_error_rate'])} |"]
    if s["infra_failed"]:
        lines.append(f"| infra-failed episodes | {s['infra_failed']} |")
    j = s.get("judge")
    if j:  # a judged suite: what its judge cost
        lines += ["", "| judge | value |", "|---|---|",
                  f"| calls / episode | {j['calls'] / max(j['samples'], 1):.2f} |",
                  f"| tokens | {j['tokens']} |", f"| cache hits | {_pct(j['cache_hit_rate'])} |",
                  f"| failures (out of format: 0) | {j['failures']} |",
                  f"| errors (no verdict: 0) | {j['errors']} |"]
    lines += ["", "| cost | mean | p50 | p90 | p99 |", "|---|---|---|---|---|"]
    for name, stats in s["cost"].items():
        if stats:
            lines.append(f"| {name} | " + " | ".join(_num(stats.get(q)) for q in
                                                  ("mean", "p50", "p90", "p99")) + " |")
    return lines + [""]


def _seed_lines(spread: dict[str, Any] | None, k: int) -> list[str]:
    if not spread or spread.get("complete", 0) < 1 or "avg_at_k" not in spread:
        return []
    lines = ["", f"| over {spread['complete']} seeds | mean | std | min | max |",
             "|---|---|---|---|---|"]
    for name, label in (("avg_at_k", f"avg@{k}"), ("pass_at_k", f"pass@{k}"),
                        ("maj_at_k", f"maj@{k}")):
        if name in spread:
            v = spread[name]
            lines.append(f"| {label} | {_pct(v['mean'])} | {_pct(v['std'])} | {_pct(v['min'])} "
                         f"| {_pct(v['max'])} |")
    return lines


# ------------------------------------------------------------------------------ plots
def write_plots(store: RunStore, summary: dict[str, Any],
                folder: Path) -> tuple[list[str], str | None]:
    """``pass_at_k.png`` and ``accuracy_vs_tool_calls.png``; ``(files, note)``."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return [], "Plots skipped: matplotlib is not installed (pip install 'tir-envs[plots]')."
    files = []
    for name, figure in (("pass_at_k.png", pass_at_k_figure(summary)),
                         ("accuracy_vs_tool_calls.png", tool_calls_figure(store, summary))):
        figure.savefig(folder / name, dpi=120, bbox_inches="tight")
        plt.close(figure)
        files.append(name)
    return files, None


def _styles(n: int) -> list[dict[str, Any]]:
    """``n`` line styles told apart by colour alone (evenly spaced hues past 10 lines), with
    markers and dashes varying as well for print in grey."""
    import matplotlib

    if n <= 10:
        colours = [matplotlib.colormaps["tab10"](i) for i in range(n)]
    else:
        colours = [matplotlib.colormaps["hsv"](i / n) for i in range(n)]
    markers, dashes = "osD^vP*Xph", ["-", "--", "-.", ":"]
    return [{"color": colours[i], "marker": markers[i % len(markers)],
             "linestyle": dashes[(i // len(markers)) % len(dashes)]} for i in range(n)]


def _new_axes(title: str, xlabel: str, ylabel: str):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3)
    return fig, ax


def _legend_outside(ax) -> None:
    """The legend to the right of the axes, never over the data."""
    if ax.lines:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)


def pass_at_k_figure(summary: dict[str, Any]):
    """pass@k against k (log 2 axis), one line per benchmark."""
    series = [(benchmark_label(name, part), s["pass_at_k"])
              for name, entry in summary["suites"].items()
              for part, s in entry["parts"].items() if s.get("pass_at_k")]
    fig, ax = _new_axes("pass@k", "k", "pass@k (%)")
    for (label, curve), style in zip(series, _styles(len(series))):
        ax.plot([int(j) for j in curve], [100 * v for v in curve.values()], label=label,
                **style)
    ax.set_xscale("log", base=2)
    _legend_outside(ax)
    return fig


def tool_calls_figure(store: RunStore, summary: dict[str, Any], cap: int = 5):
    """Accuracy by executed tool calls, one line per benchmark: the x axis is the number of
    calls in numeric order (``cap`` and more pooled), each point labelled with its episodes."""
    series = []
    for name in summary["suites"]:
        records = store.suite_records(name)
        for part in suite_of_run(name, store.config).parts:
            buckets = accuracy_by_tool_calls([r for r in records if r["part"] == part.name], cap)
            if buckets:
                series.append((benchmark_label(name, part.name), buckets))
    fig, ax = _new_axes("accuracy vs tool calls", "executed tool calls in the episode",
                        "accuracy (%)")
    for (label, buckets), style in zip(series, _styles(len(series))):
        xs = [cap if b.endswith("+") else int(b) for b in buckets]
        ys = [100 * acc for _, acc in buckets.values()]
        ax.plot(xs, ys, label=label, **style)
        for x, y, (n, _) in zip(xs, ys, buckets.values()):
            ax.annotate(f"n={n}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7,
                        color=style["color"])
    ax.set_xticks(range(cap + 1), [str(i) for i in range(cap)] + [f"{cap}+"])
    ax.set_xlim(-0.3, cap + 0.5)
    _legend_outside(ax)
    return fig


def _preset_line(cfg: dict[str, Any]) -> str:
    """What a preset run is, in words, for the report."""
    from tir_envs.bench.presets import PRESETS

    preset = PRESETS.get(cfg["preset"])
    text = f"the evaluation table of {preset.paper}" if preset else "a preset"
    if cfg.get("ifeval_metric") == "soft":
        text += "; IFEval accuracy is soft accuracy (the share of instructions met)"
    return text


def benchmark_label(suite: str, part: str) -> str:
    """A benchmark's name in tables and plots: the part, qualified when the suite differs; a
    custom suite (one part) by its own name, the file's name and content hash."""
    if suite.startswith(CUSTOM):
        return suite
    return part if part == suite else f"{suite}/{part}"


def write_outputs(folder: str | Path, by: Sequence[str] = ()) -> dict[str, Any]:
    """Rebuild ``summary.json``, the plots and ``report.md`` of a run folder; return the summary.
    ``by``: task fields to break the parts down by, besides the run's own."""
    folder = Path(folder)
    store = RunStore(folder)
    summary = summarize(store, by)
    plots, note = write_plots(store, summary, folder)
    summary["plots"] = plots
    (folder / SUMMARY).write_text(json.dumps(summary, indent=1, sort_keys=False),
                                  encoding="utf-8")
    (folder / REPORT).write_text(render_markdown(summary, plots, note), encoding="utf-8")
    return summary
