"""Judged suites in ``tir-envs bench``: the judge grades, its cost is in the report, and a run
without a judge is refused before anything starts."""

from __future__ import annotations

import json

import pytest

from tir_envs.bench import run
from tir_envs.chat.vocab import qwen3_tokenizer
from tir_envs.judge.gullible import GullibleJudge


def test_a_judged_suite_needs_a_judge(tmp_path):
    with pytest.raises(ValueError, match="--judge SPEC"):
        run("hotpotqa-judged", "oracle", out=tmp_path, limit=1, progress=False)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("policy, accuracy", [("oracle", 1.0), ("wrong", 0.0)])
def test_hotpotqa_judged_is_graded_by_the_judge(tmp_path, policy, accuracy):
    judge = GullibleJudge(qwen3_tokenizer())
    summary = run("hotpotqa-judged", policy, judge=judge, out=tmp_path, k=2, limit=2,
                  temperature=0.0, top_p=1.0, progress=False)
    part = summary["suites"]["hotpotqa-judged"]["parts"]["hotpotqa"]
    assert part["avg_at_k"] == accuracy and "em" not in part
    # 2 items x 2 samples: each item's second (identical) answer is a cache hit
    assert part["judge"]["samples"] == 4 and part["judge"]["calls"] == judge.calls == 2
    assert part["judge"]["cache_hit_rate"] == 0.5 and part["judge"]["tokens"] > 0
    records = [json.loads(x) for x in
               (tmp_path / "samples.jsonl").read_text().splitlines()]
    exchange = records[0]["trajectory"]["metadata"]["judge"]["exchange"]
    assert exchange["output"].startswith("I read") and "REFERENCE ANSWER" in exchange["user"]
    assert json.loads((tmp_path / "run.json").read_text())["judge"] == "GullibleJudge"
    assert "| judge | value |" in (tmp_path / "report.md").read_text()
