"""The bench CLI a user needs: built-in sanity policies, one's own task file with any protocol,
vLLM engine arguments."""

from __future__ import annotations

import json

import pytest

from tir_envs.bench.store import RunStore
from tir_envs.cli import main

MATH = [{"problem": "What is 2 + 3?", "answer": "5"},
        {"problem": "Simplify 6/8.", "answer": "\\frac{3}{4}"},
        {"problem": "What is 10 squared?", "solution": "It is $\\boxed{100}$."}]


def _bench(capsys, *argv: str) -> tuple[int, dict | None, str]:
    code = main(["bench", *argv, "--no-progress"])
    out, err = capsys.readouterr()
    lines = out.strip().splitlines()
    return code, json.loads(lines[-1]) if code == 0 and lines else None, err


def test_oracle_and_wrong_policies_from_the_cli(tmp_path, capsys):
    code, printed, _ = _bench(capsys, "--suite", "spider", "--policy", "oracle", "--limit", "4",
                              "--out", str(tmp_path / "o"))
    assert code == 0 and printed["accuracy_pct"]["spider"] == 100.0
    code, printed, _ = _bench(capsys, "--suite", "spider", "--policy", "wrong", "--limit", "4",
                              "--out", str(tmp_path / "w"))
    assert code == 0 and printed["accuracy_pct"]["spider"] == 0.0


@pytest.mark.parametrize("protocol", ["torl", "zerotir", "rite"])
def test_own_tasks_run_in_any_protocol_and_are_pinned(tmp_path, capsys, protocol):
    tasks = tmp_path / "mine.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in MATH))
    out = tmp_path / "run"
    argv = ["--tasks", str(tasks), "--protocol", protocol, "--policy", "oracle", "--out",
            str(out)]
    code, printed, err = _bench(capsys, *argv)
    assert code == 0, err
    config = RunStore(out).config
    name = f"custom:mine.jsonl@{config['custom'][config['suites'][0]]['sha256'][:12]}"
    assert printed["accuracy_pct"][name] == 100.0
    pin = config["custom"][name]
    assert pin["count"] == 3 and pin["env_id"] == "tir/MathCode-v0" and len(pin["sha256"]) == 64
    assert config["protocol"] == protocol
    # an edited file is another task set: refused, naming the pins
    tasks.write_text("".join(json.dumps(t) + "\n" for t in MATH[:2]))
    code, _, err = _bench(capsys, *argv)
    assert code == 1 and "holds a run with other settings (custom:" in err
    assert pin["sha256"] in err


def test_own_qa_tasks_with_another_env(tmp_path, capsys):
    tasks = tmp_path / "qa.jsonl"
    tasks.write_text(json.dumps({"id": "q1", "question": "Capital of France?",
                                 "answer": ["Paris"]}) + "\n")
    code, printed, err = _bench(capsys, "--suite", f"custom:{tasks}", "--env", "tir/Search-v0",
                                "--policy", "oracle", "--out", str(tmp_path / "run"))
    assert code == 0, err
    assert list(printed["accuracy_pct"].values()) == [100.0, 100.0]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    (name,) = summary["suites"]
    assert name.startswith("custom:qa.jsonl@") and str(tmp_path) not in name
    part = summary["suites"][name]["parts"]["qa"]
    assert part["scoring"] == "qa" and part["em"] == 1.0


def test_env_and_scoring_only_apply_to_own_tasks(tmp_path, capsys):
    code, _, err = _bench(capsys, "--suite", "aime24", "--env", "tir/Search-v0", "--policy",
                          "oracle", "--out", str(tmp_path / "x"))
    assert code == 1 and "apply to custom tasks" in err
    code, _, err = _bench(capsys, "--tasks", str(tmp_path / "none.jsonl"), "--policy", "oracle",
                          "--out", str(tmp_path / "y"))
    assert code == 1 and "no such file" in err
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_vllm_engine_arguments_reach_the_engine(tmp_path, capsys, monkeypatch):
    import tir_envs.rollout.vllm_backend as backend

    seen = {}

    class Engine:
        def __init__(self, model, tokenizer=None, **engine_kwargs):
            seen.update(engine_kwargs, model=model)
            raise RuntimeError("engine recorded")

    monkeypatch.setattr(backend, "VLLMPolicy", Engine)
    model = tmp_path / "model"
    model.mkdir()
    from tir_envs.tokenizer import qwen25_tokenizer
    qwen25_tokenizer().save_pretrained(model)
    code, _, err = _bench(capsys, "--suite", "aime24", "--policy", f"vllm:{model}",
                          "--tensor-parallel-size", "2", "--max-model-len", "8192",
                          "--gpu-memory-utilization", "0.45", "--engine-arg", "enforce_eager=true",
                          "--out", str(tmp_path / "run"))
    assert code == 1 and "engine recorded" in err
    assert seen == {"model": str(model), "tensor_parallel_size": 2, "max_model_len": 8192,
                    "gpu_memory_utilization": 0.45, "enforce_eager": True}


def test_openai_spreads_requests_over_several_endpoints_with_the_same_samples(tmp_path, capsys):
    pytest.importorskip("aiohttp")
    from tests.fixtures.completions_server import SeededServer

    with SeededServer() as one, SeededServer() as two:
        common = ["--suite", "gsm8k", "--limit", "6", "-k", "2", "--model", "seeded",
                  "--concurrency", "8"]
        code, single, err = _bench(capsys, *common, "--policy", f"openai:{one.url}", "--out",
                                   str(tmp_path / "one"))
        assert code == 0, err
        alone = one.requests
        code, spread, err = _bench(capsys, *common, "--policy", f"openai:{one.url},{two.url}",
                                   "--out", str(tmp_path / "two"))
        assert code == 0, err
        first, second = one.requests - alone, two.requests
    assert alone == 24  # 12 samples x 2 turns (a Python call, then the boxed answer)
    assert first + second == 24 and first >= 6 and second >= 6
    a = RunStore(tmp_path / "one").suite_records("gsm8k")
    b = RunStore(tmp_path / "two").suite_records("gsm8k")
    assert [r["trajectory"]["token_ids"] for r in a] == [r["trajectory"]["token_ids"] for r in b]
    assert all(r["tool_calls"] == 1 and r["answered"] for r in a)


def test_the_same_task_file_in_two_folders_pairs_in_compare(tmp_path, capsys):
    """Issue 36 item 2: a custom task file is the same benchmark wherever it lies (name and
    content hash), and its folder never fills the report's tables."""
    runs = []
    for where in ("a", "b"):
        (tmp_path / where).mkdir()
        tasks = tmp_path / where / "mine.jsonl"
        tasks.write_text("".join(json.dumps(t) + "\n" for t in MATH))
        out = tmp_path / f"run-{where}"
        code, _, err = _bench(capsys, "--tasks", str(tasks), "--policy",
                              "oracle" if where == "a" else "wrong", "--out", str(out))
        assert code == 0, err
        runs.append(str(out))
        report = (out / "report.md").read_text()
        assert str(tmp_path) not in report
    assert main(["bench", "compare", *runs]) == 0
    table = capsys.readouterr().out
    row = next(ln for ln in table.splitlines() if ln.startswith("| custom:mine.jsonl@"))
    assert "| 3 | 100.0 | 0.0 | -100.0 |" in row
    assert "Scored only by" not in table


def test_bench_list_shows_each_suites_license(capsys):
    assert main(["bench", "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    for suite, license in [("amc23", "MIT"), ("minerva_math", "CC BY-NC-SA 4.0"),
                           ("olympiadbench", "OpenBMB"), ("hmmt_feb2025", "HMMT"),
                           ("theoremqa", "TIGER-AI-Lab"), ("spider", "CC BY-SA 4.0")]:
        at = next(i for i, line in enumerate(out) if line.startswith(f"{suite} "))
        assert "license:" in out[at + 1] and license in out[at + 1], (suite, out[at + 1])
