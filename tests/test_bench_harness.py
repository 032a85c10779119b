"""The benchmark harness: resume, seeds, pinned data, run folders, CLI, report and compare."""

from __future__ import annotations

import json

import pytest

from tir_envs.bench import Part, Suite, register, run
from tir_envs.bench.oracle import ItemScriptedPolicy, oracle
from tir_envs.bench.store import RunFolderError, RunStore
from tir_envs.bench.suites import SUITES, SuiteDataError
from tir_envs.cli import main
from tir_envs.rollout.specs import PolicySpecError


class Recording:
    """The oracle, recording (item, sample, seed) of every generation; optionally interrupted
    (KeyboardInterrupt, as Ctrl-C) at its ``stop_after``-th generation."""

    def __init__(self, stop_after: int | None = None):
        self.inner = oracle()
        self.calls: list[tuple[int, int, int | None]] = []
        self.stop_after = stop_after

    async def generate_job(self, job, prompt_ids, stop, sampling):
        if self.stop_after is not None and len(self.calls) >= self.stop_after:
            raise KeyboardInterrupt
        self.calls.append((job.item, job.sample, sampling.seed))
        return await self.inner.generate_job(job, prompt_ids, stop, sampling)


def _keys(folder, suite):
    return [(r["item"], r["sample"]) for r in RunStore(folder).suite_records(suite)]


def test_seeds_are_per_item_and_sample_and_items_run_in_file_order(tmp_path):
    policy = Recording()
    run("aime25", policy, out=tmp_path, k=3, seed=100, limit=4, progress=False, report=False,
        concurrency=1)
    assert [c[:2] for c in policy.calls] == [(i, s) for i in range(4) for s in range(3)]
    assert all(seed == 100 + item * 3 + sample for item, sample, seed in policy.calls)
    records = RunStore(tmp_path).suite_records("aime25")
    assert [r["seed"] for r in records] == list(range(100, 112))
    assert [r["task_id"] for r in records[::3]] == \
        [t.id for _, t in SUITES["aime25"].items(limit=4)]


def test_an_interrupted_run_resumes_without_redoing_finished_samples(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        run("aime24", Recording(stop_after=5), out=tmp_path, k=2, seed=7, limit=4,
            progress=False, report=False, concurrency=1)
    before = RunStore(tmp_path).records
    assert len(before) == 5
    # a record cut off mid-write by the interrupt is not a finished sample
    with open(tmp_path / "samples.jsonl", "a", encoding="utf-8") as f:
        f.write('{"suite": "aime24", "item": 3, "sam')
    again = Recording()
    summary = run("aime24", again, out=tmp_path, k=2, seed=7, limit=4, progress=False,
                  concurrency=1)
    done = {(s, i, j) for (s, i, j) in before}
    assert {("aime24", i, j) for i, j, _ in again.calls}.isdisjoint(done)
    assert len(again.calls) == 3
    after = RunStore(tmp_path).records
    assert len(after) == 8 and all(after[key] == before[key] for key in before)
    # the seeds are those of an uninterrupted run
    assert [r["seed"] for r in RunStore(tmp_path).suite_records("aime24")] == list(range(7, 15))
    assert summary["suites"]["aime24"]["parts"]["aime24"]["avg_at_k"] == 1.0
    # a third run finds nothing to do
    idle = Recording()
    run("aime24", idle, out=tmp_path, k=2, seed=7, limit=4, progress=False, report=False)
    assert idle.calls == []


def test_an_infra_failed_sample_is_retried_on_resume(tmp_path):
    run("aime24", oracle(), out=tmp_path, k=1, limit=2, progress=False, report=False)
    lines = (tmp_path / "samples.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["infra_failed"] = True
    (tmp_path / "samples.jsonl").write_text("\n".join([json.dumps(first), lines[1]]) + "\n")
    again = Recording()
    run("aime24", again, out=tmp_path, k=1, limit=2, progress=False, report=False)
    assert [c[:2] for c in again.calls] == [(0, 0)]
    assert not RunStore(tmp_path).records[("aime24", 0, 0)]["infra_failed"]


def test_a_run_where_every_sample_failed_says_so_and_is_retried(tmp_path):
    from tir_envs.bench.harness import BenchmarkFailed

    class Broken:
        async def generate(self, prompt_ids, stop, sampling):
            raise ConnectionError("server at 127.0.0.1:1 refused the connection")

    with pytest.raises(BenchmarkFailed, match="all 4 samples of suite 'aime24' failed .first: "
                                              ".*ConnectionError: server at"):
        run("aime24", Broken(), out=tmp_path, k=2, limit=2, progress=False)
    assert all(r["infra_failed"] for r in RunStore(tmp_path).records.values())
    summary = run("aime24", oracle(), out=tmp_path, k=2, limit=2, progress=False)
    assert summary["suites"]["aime24"]["parts"]["aime24"]["avg_at_k"] == 1.0


def test_a_folder_with_other_settings_is_refused(tmp_path):
    run("aime24", oracle(), out=tmp_path, k=1, limit=1, progress=False, report=False)
    with pytest.raises(RunFolderError, match="k: 1 in the folder, 2 now"):
        run("aime24", oracle(), out=tmp_path, k=2, limit=1, progress=False, report=False)
    with pytest.raises(RunFolderError, match="temperature"):
        run("aime24", oracle(), out=tmp_path, k=1, limit=1, temperature=0.5, progress=False)
    # another suite may join the same run
    run("aime25", oracle(), out=tmp_path, k=1, limit=1, progress=False, report=False)
    assert RunStore(tmp_path).config["suites"] == ["aime24", "aime25"]


def test_changed_data_is_refused_when_the_suite_loads(tmp_path):
    good = SUITES["aime24"].parts[0]
    bad_hash = Part("aime24x", good.file, good.count, "0" * 64, good.load, "math")
    bad_count = Part("aime24y", good.file, 31, good.sha256, good.load, "math")
    register(Suite("test-bad-hash", "tir/MathCode-v0", (bad_hash,), {"protocol": "torl"}))
    register(Suite("test-bad-count", "tir/MathCode-v0", (bad_count,), {"protocol": "torl"}))
    try:
        with pytest.raises(SuiteDataError, match="aime2024.jsonl changed: its sha256 is "
                                                 f"{good.sha256}"):
            run("test-bad-hash", oracle(), out=tmp_path / "a", progress=False, report=False)
        with pytest.raises(SuiteDataError, match="gave 30 items, the suite is pinned to 31"):
            run("test-bad-count", oracle(), out=tmp_path / "b", progress=False, report=False)
    finally:
        SUITES.pop("test-bad-hash")
        SUITES.pop("test-bad-count")


def test_bad_arguments_are_explained(tmp_path):
    with pytest.raises(KeyError, match="unknown suite 'aime'"):
        run("aime", oracle(), out=tmp_path)
    with pytest.raises(ValueError, match="k must be a positive int"):
        run("aime24", oracle(), out=tmp_path, k=0)
    with pytest.raises(ValueError, match="fixed protocol"):
        run("spider", oracle(), out=tmp_path, protocol="rite", progress=False)
    with pytest.raises(TypeError, match="spec string"):
        run("aime24", object(), out=tmp_path)
    with pytest.raises(PolicySpecError, match="unknown kind 'magic'"):
        run("aime24", "magic:thing", out=tmp_path)


def test_item_scripted_policies_need_the_harness():
    import asyncio
    with pytest.raises(TypeError, match="benchmark harness"):
        asyncio.run(ItemScriptedPolicy(lambda job: ["x"]).generate([1], [], None))


# ------------------------------------------------------------------------------ CLI
def test_cli_runs_a_scripted_spec_then_reports_and_compares(tmp_path, capsys):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["<think>guess</think>\n<answer>xyzzy</answer>"]))
    a, b = tmp_path / "wrong", tmp_path / "oracle"
    assert main(["bench", "--suite", "bamboogle", "--policy", f"scripted:{script}", "-k", "2",
                 "--limit", "8", "--out", str(a), "--no-progress"]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed == {"out": str(a), "accuracy_pct": {"bamboogle": 0.0, "avg": 0.0}}
    report = (a / "report.md").read_text()
    assert "## bamboogle" in report and "| avg@2 | 0.0 |" in report and "| EM | 0.0 |" in report
    assert (a / "pass_at_k.png").stat().st_size > 1000
    assert (a / "accuracy_vs_tool_calls.png").stat().st_size > 1000
    summary = json.loads((a / "summary.json").read_text())
    assert summary["suites"]["bamboogle"]["parts"]["bamboogle"]["items"] == 8
    assert summary["config"]["policy"] == f"scripted:{script}"

    run("bamboogle", oracle(), out=b, k=2, limit=8, progress=False)
    assert main(["bench", "compare", str(a), str(b)]) == 0
    table = capsys.readouterr().out
    row = next(line for line in table.splitlines() if line.startswith("| bamboogle"))
    # 8 items, all improved: the exact paired test gives p = 2/256
    assert "| 8 | 0.0 | 100.0 | +100.0 | 0.0078 (exact) | significant |" in row

    (b / "report.md").unlink()
    assert main(["bench", "report", str(b)]) == 0
    assert "| avg@2 | 100.0 |" in (b / "report.md").read_text()
    assert main(["bench", "list"]) == 0
    assert "math500    tir/MathCode-v0      500 items" in capsys.readouterr().out


def test_the_report_skips_plots_with_a_note_without_matplotlib(tmp_path, monkeypatch):
    import sys

    from tir_envs.bench.report import write_outputs

    run("aime24", oracle(), out=tmp_path, k=1, limit=2, progress=False, report=False)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    summary = write_outputs(tmp_path)
    assert summary["plots"] == [] and not list(tmp_path.glob("*.png"))
    assert "Plots skipped: matplotlib is not installed" in (tmp_path / "report.md").read_text()


def test_cli_errors_are_explained(tmp_path, capsys):
    cases = [(["bench", "--policy", "hf:/x", "--out", str(tmp_path)], 2, "name a suite"),
             (["bench", "--suite", "mmlu", "--policy", "hf:/x", "--out", str(tmp_path)], 2,
              "unknown suite(s) ['mmlu']"),
             (["bench", "--suite", "aime24"], 2, "--policy and --out are required"),
             (["bench", "report", str(tmp_path)], 1, "not a benchmark run folder")]
    for argv, code, message in cases:
        assert main(argv) == code
        assert message in capsys.readouterr().err


def test_cli_runs_a_transformers_model_folder(tmp_path, capsys):
    pytest.importorskip("torch")
    from tests.fixtures.tiny import tiny_qwen2, tiny_tokenizer

    folder = tmp_path / "model"
    tok = tiny_tokenizer()
    tiny_qwen2(tok).save_pretrained(folder)
    tok.save_pretrained(folder)
    out = tmp_path / "run"
    assert main(["bench", "--suite", "gsm8k", "--policy", f"hf:{folder}", "-k", "2",
                 "--limit", "2", "--max-tokens", "8", "--temperature", "1.0", "--out", str(out),
                 "--no-progress"]) == 0
    records = RunStore(out).suite_records("gsm8k")
    assert len(records) == 4
    traj = records[0]["trajectory"]
    assert max(traj["prompt_ids"] + traj["token_ids"]) < len(tok)  # the model's own tokenizer
    assert all(0 < r["response_tokens"] <= 16 for r in records)


# ------------------------------------------------------------------------------ compare
def test_compare_keys_benchmarks_by_suite_and_part(tmp_path):
    """math500 under the ToRL suite and under autotir are two benchmarks: the old compare keyed
    by bare part name paired them (and within one run one replaced the other)."""
    from tir_envs.bench.compare import compare, format_result
    from tir_envs.bench.oracle import adversary

    a, b = tmp_path / "a", tmp_path / "b"
    run(["math500", "autotir"], oracle(), out=a, k=1, limit=2, progress=False, report=False)
    run("math500", oracle(), out=b, k=1, limit=2, progress=False, report=False)
    run("autotir", adversary("wrong"), out=b, k=1, limit=2, progress=False, report=False)
    result = compare(a, b)
    rows = {(r["suite"], r["part"]): r for r in result["rows"]}
    assert rows[("math500", "math500")]["diff"] == 0.0
    assert rows[("autotir", "math500")]["diff"] == -1.0
    assert len(rows) == 11 and result["only_a"] == result["only_b"] == []
    assert result["settings_differ"] == {}
    text = format_result(result, "a", "b")
    assert "| math500 | 2 | 100.0 | 100.0 | +0.0 | 1.0000 (exact) | n.s. |" in text
    assert "| autotir/math500 | 2 | 100.0 | 0.0 | -100.0 | 0.5000 (exact) | n.s. |" in text


def test_compare_lists_one_sided_benchmarks_and_flags_different_settings(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    run(["aime24", "aime25"], oracle(), out=a, k=1, limit=3, progress=False, report=False)
    run(["aime24", "math500"], oracle(), out=b, k=2, limit=3, temperature=0.5, max_tokens=900,
        protocol="rite", progress=False, report=False)
    assert main(["bench", "compare", str(a), str(b)]) == 0
    out, err = capsys.readouterr()
    assert "Scored only by A (not compared): aime25" in out
    assert "Scored only by B (not compared): math500" in out
    for line in ("- k: A 1, B 2", "- temperature: A 0.0, B 0.5", "- max_tokens: A None, B 900",
                 "- protocol: A None, B 'rite'"):
        assert line in out
    assert "warning: the runs differ in k, max_tokens, protocol, temperature" in err
    assert "| aime24 | 3 |" in out
