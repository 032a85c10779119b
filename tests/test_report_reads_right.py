"""Issue 36 item 3: figures that read as what they are.  TP is per item (it never grows with
the number of items nor sums in Avg), a ``--policy wrong`` report says why IFEval scores above
0, and a search index's cold start is loaded before the first episode instead of being counted
in the first calls' latency."""

from __future__ import annotations

import json
import threading
import time

from tir_envs.bench.store import RunStore
from tir_envs.cli import main
from tir_envs.tools.search.retriever import Hit, Retriever


def _summary(folder) -> dict:
    return json.loads((folder / "summary.json").read_text())


def test_tp_of_an_oracle_run_is_100_percent_whatever_the_item_count(tmp_path, capsys):
    for limit in ("3", "25"):
        out = tmp_path / f"run{limit}"
        assert main(["bench", "--suite", "aime24", "--policy", "oracle", "--limit", limit,
                     "--out", str(out), "--no-progress"]) == 0
        table = _summary(out)["autotir_table"]
        assert table["aime24"]["tp"] == 1.0 and table["avg"]["tp"] == 1.0
        report = (out / "report.md").read_text()
        assert "| TP | 100.0 | 100.0 |" in report and "TP (tool productivity" in report


def test_a_wrong_policy_report_says_ifeval_scores_above_zero_by_design(tmp_path, capsys):
    out = tmp_path / "wrong"
    assert main(["bench", "--suite", "ifeval,aime24", "--policy", "wrong", "--limit", "20",
                 "--out", str(out), "--no-progress"]) == 0
    table = _summary(out)["autotir_table"]
    assert table["aime24"]["acc"] == 0.0
    report = (out / "report.md").read_text()
    assert "must score 0" in report and "ifeval has no gold answer" in report
    assert "above 0 by design" in report
    plain = tmp_path / "plain"
    assert main(["bench", "--suite", "aime24", "--policy", "wrong", "--limit", "2",
                 "--out", str(plain), "--no-progress"]) == 0
    assert "by design" not in (plain / "report.md").read_text()


class ColdIndex(Retriever):
    """A retriever whose index loads on the first query and takes ``LOAD_S`` (as a Lucene
    index's first search does: files mapped, the JVM's code compiled); one instance shared by
    every env, as the shipped index is (``shared_retriever``)."""

    LOAD_S = 1.5

    def __init__(self):
        self.lock = threading.Lock()
        self.loaded = False

    @property
    def num_docs(self) -> int:
        return 1

    def search(self, query: str, k: int = 3) -> list[Hit]:
        with self.lock:
            if not self.loaded:
                time.sleep(self.LOAD_S)
                self.loaded = True
        return [Hit("d1", 1.0, "Paris\nParis is the capital of France.")][:k]


def test_the_index_loads_before_the_first_episode_not_in_its_latency(tmp_path):
    from tir_envs.bench.harness import run
    from tir_envs.rollout import ScriptedPolicy

    tasks = tmp_path / "qa.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Capital {i}?",
                                         "answer": ["Paris"]}) + "\n" for i in range(4)))
    policy = ScriptedPolicy(["<search>capital of France</search>", "<answer>Paris</answer>"])
    index = ColdIndex()
    run([], policy, out=tmp_path / "run", tasks=tasks, env="tir/Search-v0",
        env_kwargs={"retriever": index}, progress=False, concurrency=1)
    records = [json.loads(line) for line in (tmp_path / "run/samples.jsonl").open()]
    latencies = [x for r in records for x in r["tool_latency_s"]]
    assert len(latencies) == 4 and index.loaded
    assert max(latencies) < ColdIndex.LOAD_S / 3, latencies
    assert all(r["correct"] for r in records)
    assert RunStore(tmp_path / "run").config["suites"][0].startswith("custom:qa.jsonl@")
