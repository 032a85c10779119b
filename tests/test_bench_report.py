"""What a researcher expects in the report: breakdowns by task field, intervals for pass@k,
spread over seeds, the sampling defaults stated, plots a person can read."""

from __future__ import annotations

import json

import pytest

from tir_envs.bench import run
from tir_envs.bench.oracle import ItemScriptedPolicy, gold_of, written
from tir_envs.bench.store import RunStore
from tir_envs.cli import main


def _scripted(correct) -> ItemScriptedPolicy:
    """Gold when ``correct(job)`` says so, else a wrong answer, in the suite's protocol."""
    def script(job):
        return [written(job.protocol, gold_of(job.task, job.part.scoring) if correct(job)
                        else "xyzzy")]
    return ItemScriptedPolicy(script)


def test_math500_is_broken_down_by_level_and_subject(tmp_path):
    easy = _scripted(lambda job: job.task.meta["level"] <= 2)
    summary = run("math500", easy, out=tmp_path, k=1, limit=40, progress=False)
    part = summary["suites"]["math500"]["parts"]["math500"]
    levels = part["by"]["level"]
    assert list(levels) == sorted(levels, key=int)  # numeric order
    assert sum(g["items"] for g in levels.values()) == 40
    assert all(g["avg_at_k"] == (1.0 if int(v) <= 2 else 0.0) for v, g in levels.items())
    subjects = part["by"]["subject"]
    assert sum(g["items"] for g in subjects.values()) == 40 and "Algebra" in subjects
    records = RunStore(tmp_path).suite_records("math500")
    assert {"level", "subject", "unique_id"} <= set(records[0]["meta"])
    assert "solution" not in records[0]["meta"]  # long fields stay out of the records
    report = (tmp_path / "report.md").read_text()
    assert "| level | items | avg@1 | 95% CI | pass@1 |" in report
    assert "| subject | items | avg@1 | 95% CI | pass@1 |" in report


def test_any_suite_breaks_down_by_a_field_and_a_missing_field_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["bench", "--suite", "hotpotqa", "--policy", "oracle", "--limit", "12",
                 "--by", "type", "--out", str(out), "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    types = summary["suites"]["hotpotqa"]["parts"]["hotpotqa"]["by"]["type"]
    assert sum(g["items"] for g in types.values()) == 12 and set(types) <= {"bridge",
                                                                            "comparison"}
    assert "| type | items |" in (out / "report.md").read_text()
    # a report can add a breakdown afterwards
    assert main(["bench", "report", str(out), "--by", "level"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert "level" in summary["suites"]["hotpotqa"]["parts"]["hotpotqa"]["by"]
    capsys.readouterr()
    other = tmp_path / "other"
    assert main(["bench", "--suite", "hotpotqa", "--policy", "oracle", "--by", "difficulty",
                 "--out", str(other), "--no-progress"]) == 1
    assert "no item of hotpotqa has the field(s) ['difficulty']" in capsys.readouterr().err
    assert not other.exists()


def test_pass_at_k_has_bootstrap_intervals_beside_avg_and_maj(tmp_path):
    # item i is right on sample s when s < i % 5 (0 to 4 of 4 samples right)
    policy = _scripted(lambda job: job.sample < job.item % 5)
    summary = run("aime24", policy, out=tmp_path, k=4, limit=20, progress=False)
    part = summary["suites"]["aime24"]["parts"]["aime24"]
    assert set(part["pass_at_k_ci"]) == {"1", "2", "4"}
    for j, (lo, hi) in part["pass_at_k_ci"].items():
        assert lo < part["pass_at_k"][j] < hi
    assert part["pass_at_k_ci"]["4"][1] <= 1.0
    report = (tmp_path / "report.md").read_text()
    lo, hi = part["pass_at_k_ci"]["2"]
    assert f"| pass@2 | {100 * part['pass_at_k']['2']:.1f} | [{100 * lo:.1f}, {100 * hi:.1f}] |" \
        in report


def test_seeds_give_replicates_and_their_spread(tmp_path):
    # right exactly when the sample's seed is a multiple of 3: replicates score differently
    policy = _scripted(lambda job: job.seed % 3 == 0)
    summary = run("aime24", policy, out=tmp_path, k=2, seeds=3, seed=5, limit=6,
                  progress=False)
    records = RunStore(tmp_path).suite_records("aime24")
    assert len(records) == 6 * 2 * 3
    assert [r["seed"] for r in records] == list(range(5, 5 + 36))
    spread = summary["suites"]["aime24"]["parts"]["aime24"]["over_seeds"]
    assert spread["seeds"] == spread["complete"] == 3
    per_seed = spread["avg_at_k"]["per_seed"]
    expected = [sum((5 + i * 6 + r * 2 + s) % 3 == 0 for i in range(6) for s in range(2)) / 12
                for r in range(3)]
    assert per_seed == pytest.approx(expected)
    assert spread["avg_at_k"]["min"] == min(expected)
    assert spread["avg_at_k"]["std"] > 0
    report = (tmp_path / "report.md").read_text()
    assert "k = 2 × 3 seeds" in report and "| over 3 seeds | mean | std | min | max |" in report


def test_sampling_defaults_follow_the_field_and_the_report_states_them(tmp_path):
    run("aime24", "oracle", out=tmp_path / "one", k=1, limit=2, progress=False)
    cfg = RunStore(tmp_path / "one").config
    assert (cfg["temperature"], cfg["top_p"]) == (0.0, 1.0)
    assert "Sampling: greedy: the default for one sample per item" in \
        (tmp_path / "one" / "report.md").read_text()
    run("aime24", "oracle", out=tmp_path / "many", k=4, limit=2, progress=False)
    cfg = RunStore(tmp_path / "many").config
    assert (cfg["temperature"], cfg["top_p"]) == (0.6, 0.95)
    assert "temperature 0.6, top-p 0.95, each sample seeded" in \
        (tmp_path / "many" / "report.md").read_text()
    run("aime24", "oracle", out=tmp_path / "given", k=1, limit=2, temperature=1.0, top_p=1.0,
        progress=False)
    assert "Sampling: as given." in (tmp_path / "given" / "report.md").read_text()


def test_plots_have_distinct_colours_a_legend_outside_and_tool_calls_in_numeric_order(
        tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.colors import to_hex

    from tir_envs.bench.report import pass_at_k_figure, summarize, tool_calls_figure

    run(["autotir", "math500", "aime24"], "oracle", out=tmp_path, k=2, limit=2,
        progress=False, report=False)
    store = RunStore(tmp_path)
    summary = summarize(store)
    for figure in (pass_at_k_figure(summary), tool_calls_figure(store, summary)):
        ax = figure.axes[0]
        colours = [to_hex(line.get_color()) for line in ax.lines]
        assert len(ax.lines) == 12 and len(set(colours)) == 12
        figure.canvas.draw()
        legend = ax.get_legend().get_window_extent()
        assert legend.x0 >= ax.get_window_extent().x1  # right of the data, not over it
    ax = tool_calls_figure(store, summary).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2", "3", "4", "5+"]
    assert all(list(line.get_xdata()) == sorted(line.get_xdata()) for line in ax.lines)
    assert any(t.get_text() == "n=4" for t in ax.texts)  # 2 items x 2 samples, no tool call
