"""``tir-envs bench --preset``: each seed paper's own table runs end to end (the first 5 items
of each of its suites, the oracle policy) with the paper's k, sampling, protocol and call
budget, and the report states the preset (issue 33)."""

from __future__ import annotations

import json

import pytest

from tir_envs.bench.presets import PRESETS, check_preset
from tir_envs.bench.store import RunStore
from tir_envs.cli import main

#: per preset: k, temperature, top-p, protocol
EXPECTED = {"torl": (1, 0.0, 1.0, "torl"), "zerotir": (32, 1.0, 0.7, "zerotir"),
            "verltool": (1, 0.6, 0.95, "torl"), "rite": (16, 0.6, 0.95, "rite"),
            "autotir": (1, 0.0, 1.0, None)}


#: per preset: the rows of its paper's table across benchmarks (only AutoTIR reports TS, TP)
PAPER_TABLE = {"torl": ["accuracy (avg@1)"], "zerotir": ["accuracy (avg@32)"],
               "verltool": ["accuracy (avg@1)"], "rite": ["accuracy (avg@16)"],
               "autotir": ["accuracy (avg@1)", "TS", "TP"]}


def _table_rows(report: str) -> list[str]:
    """The row labels of the report's table across suites."""
    section = report.split("## Across suites", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1].strip() for line in section.splitlines()
            if line.startswith("|") and not line.startswith("|---")]
    return rows[1:]  # the header row names the benchmarks


@pytest.mark.parametrize("name", list(PRESETS))
def test_each_preset_runs_its_papers_table_end_to_end(name, tmp_path, capsys):
    out = tmp_path / name
    code = main(["bench", "--preset", name, "--policy", "oracle", "--limit", "5", "--out",
                 str(out), "--no-progress"])
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    cfg = summary["config"]
    k, temperature, top_p, protocol = EXPECTED[name]
    assert (cfg["k"], cfg["temperature"], cfg["top_p"], cfg["protocol"]) == \
        (k, temperature, top_p, protocol)
    assert cfg["preset"] == name and cfg["suites"] == list(PRESETS[name].suites)
    report = (out / "report.md").read_text()
    assert f"Preset `{name}`" in report
    assert _table_rows(report) == PAPER_TABLE[name]  # exactly the paper's table (issue 47)
    if "TS" not in PAPER_TABLE[name]:
        assert "| TS |" not in report and "| TP (%) |" not in report
    store = RunStore(out)
    for suite in PRESETS[name].suites:
        records = store.suite_records(suite)
        parts = len(summary["suites"][suite]["parts"])
        assert len(records) == 5 * k * parts
        assert all(r["correct"] for r in records), suite  # the oracle: every gold gradable
    assert all(v == 100.0 for v in printed["accuracy_pct"].values())


def test_verltool_preset_runs_four_turns_at_eval(tmp_path, capsys):
    assert PRESETS["verltool"].env_kwargs == {"max_turns": 4, "max_tool_calls": 4}
    main(["bench", "--preset", "verltool", "--policy", "oracle", "--limit", "1", "--out",
          str(tmp_path), "--no-progress"])
    capsys.readouterr()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["config"]["env_kwargs"] == {"max_tool_calls": "4", "max_turns": "4"}


def test_autotir_preset_reports_ifeval_as_soft_accuracy(tmp_path, capsys):
    """A response that meets some instructions scores its share in AutoTIR's table."""
    from tir_envs.bench.report import autotir_table

    part = {"items": 1, "avg_at_k": 0.0, "ifeval": {"soft": 0.5, "prompt_strict": 0.0},
            "tools": {"ts": None, "tp": 0.0, "counts": {"correct": 0, "calls": 0,
                                                        "ts_calls": 0, "ts_right": 0}}}
    suites = {"autotir": {"parts": {"ifeval": part}}}
    assert autotir_table(suites, "soft")["autotir/ifeval"]["acc"] == 0.5
    assert autotir_table(suites)["autotir/ifeval"]["acc"] == 0.0
    assert PRESETS["autotir"].ifeval_metric == "soft"


def test_a_preset_refuses_settings_it_fixes(tmp_path, capsys):
    code = main(["bench", "--preset", "torl", "-k", "4", "--temperature", "0",
                 "--policy", "oracle", "--out", str(tmp_path)])
    assert code != 0 and "--preset torl fixes -k, --temperature" in capsys.readouterr().err
    assert not tmp_path.joinpath("run.json").exists()
    with pytest.raises(ValueError, match=r"preset 'zerotir' fixes.*k 8 \(preset: 32\)"):
        check_preset("zerotir", list(PRESETS["zerotir"].suites), 8, 1.0, 0.7, "zerotir", {})
