"""``tir-envs bench --agent``: an agent program benchmarked through the gateway on a suite, with
the harness's own plan, records, summary and resume, graded by the suite env's reward on what
the policy wrote (never on what the agent returns)."""

from __future__ import annotations

import json

from tir_envs.bench.store import RunStore
from tir_envs.cli import main

MATH = [{"problem": "What is 2 + 3?", "answer": "5"},
        {"problem": "Simplify 6/8.", "answer": "\\frac{3}{4}"},
        {"problem": "What is 10 squared?", "answer": "100"}]


def _bench(capsys, *argv: str) -> tuple[int, dict | None, str]:
    code = main(["bench", *argv, "--no-progress"])
    out, err = capsys.readouterr()
    lines = out.strip().splitlines()
    return code, json.loads(lines[-1]) if code == 0 and lines else None, err


def _files(tmp_path):
    tasks, script = tmp_path / "mine.jsonl", tmp_path / "policy.json"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in MATH))
    script.write_text(json.dumps(["The sum is \\boxed{5}."]))
    return tasks, script


def test_an_agent_is_benchmarked_through_the_gateway_with_the_suites_metrics(tmp_path, capsys):
    tasks, script = _files(tmp_path)
    out = tmp_path / "run"
    argv = ["--tasks", str(tasks), "--policy", f"scripted:{script}", "--agent",
            "tests.gateway_bench_agents:chat_answer_agent", "-k", "2", "--out", str(out)]
    code, printed, err = _bench(capsys, *argv)
    assert code == 0, err
    (name,) = [n for n in printed["accuracy_pct"] if n != "avg"]
    assert name.startswith("custom:mine.jsonl@")
    assert printed["accuracy_pct"][name] == round(100 / 3, 2)  # 2 of 6 samples: gold 5
    records = RunStore(out).suite_records(name)
    assert len(records) == 6 and not any(r["infra_failed"] for r in records)
    for r in records:
        gw = r["trajectory"]["metadata"]["gateway"]
        assert gw["calls"] == 1 and gw["breaks"] == 0
        # the agent claims \boxed{CORRECT}: recorded, never graded
        assert gw["agent_answer"].startswith("\\boxed{CORRECT}")
        assert r["answer"] == "5" and r["correct"] == (r["gold"] == "5")
    summary = json.loads((out / "summary.json").read_text())
    assert json.loads((out / "run.json").read_text())["agent"] == \
        "tests.gateway_bench_agents:chat_answer_agent"
    assert summary  # the harness's report was written
    # a rerun resumes: nothing left to run, same figures
    code, again, _ = _bench(capsys, *argv)
    assert code == 0 and again["accuracy_pct"] == printed["accuracy_pct"]
    assert len(RunStore(out).suite_records(name)) == 6


def test_a_crashing_agent_fails_its_samples_and_a_bad_spec_is_refused(tmp_path, capsys):
    tasks, script = _files(tmp_path)
    code, _, err = _bench(capsys, "--tasks", str(tasks), "--policy", f"scripted:{script}",
                          "--agent", "tests.gateway_bench_agents:crashing_agent", "--out",
                          str(tmp_path / "c"))
    assert code == 1 and "all 3 samples" in err and "the agent's own bug" in err
    code, _, err = _bench(capsys, "--tasks", str(tasks), "--policy", f"scripted:{script}",
                          "--agent", "tests.gateway_bench_agents", "--out", str(tmp_path / "d"))
    assert code == 1 and "--agent must be module:function" in err
    assert not (tmp_path / "d").exists()
