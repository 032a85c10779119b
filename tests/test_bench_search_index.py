"""The search suites on one's own index (``--env-arg index=PATH``, the papers' wiki-18
setting): the episodes search that index, and ``run.json`` and the report name it."""

from __future__ import annotations

import json

import pytest

from tir_envs.bench.store import CONFIG
from tir_envs.cli import main
from tir_envs.tools.search import build_index

MARKER = "Zorblax Quendrith"
DOCS = [{"id": "z1", "title": MARKER, "text": f"{MARKER} is a town that exists only here."},
        {"id": "z2", "title": "Other", "text": "Nothing to see."}]


@pytest.fixture(scope="module")
def own_index(tmp_path_factory):
    folder = tmp_path_factory.mktemp("own")
    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    return build_index(corpus, folder / "idx", backend="bm25")


def _bench(capsys, *argv: str) -> int:
    code = main(["bench", *argv, "--no-progress"])
    capsys.readouterr()
    return code


def test_a_search_suite_runs_on_the_index_given_and_names_it(own_index, tmp_path, capsys):
    script = tmp_path / "script.json"
    script.write_text(json.dumps([f"<search>{MARKER}</search>", "<answer>nowhere</answer>"]))
    out = tmp_path / "run"
    assert _bench(capsys, "--suite", "hotpotqa", "--policy", f"scripted:{script}", "--limit",
                  "2", "--env-arg", f"index={own_index}", "--out", str(out)) == 0
    recorded = json.loads((out / CONFIG).read_text())["search_index"]
    assert recorded == {"path": str(own_index.resolve()), "backend": "bm25", "num_docs": 2,
                        "corpus": str(own_index.parent / "corpus.jsonl")}
    report = (out / "report.md").read_text()
    assert f"Search index: `{own_index.resolve()}` (2 passages, bm25, corpus" in report
    summary = json.loads((out / "summary.json").read_text())
    assert summary["suites"]["hotpotqa"]["search_index"]["num_docs"] == 2
    # every episode's search read the given index: its only matching passage came back
    records = [json.loads(line) for p in out.rglob("*.jsonl") for line in p.open()]
    searched = [r["trajectory"]["turns"][0]["tool_results"][0] for r in records
                if "trajectory" in r]
    assert len(searched) == 2
    assert all(s["docids"] == ["z1"] and s["status"] == "ok" for s in searched)


def test_the_shipped_index_is_named_when_none_is_given(tmp_path, capsys):
    out = tmp_path / "run"
    assert _bench(capsys, "--suite", "bamboogle", "--policy", "oracle", "--limit", "1",
                  "--out", str(out)) == 0
    assert "search_index" not in json.loads((out / CONFIG).read_text())
    assert "Search index: the HotpotQA dev-distractor context paragraphs (10,785 passages)" \
        in (out / "report.md").read_text()


def test_a_missing_index_or_two_sources_are_refused_before_the_run(own_index, tmp_path,
                                                                   capsys):
    code = main(["bench", "--suite", "hotpotqa", "--policy", "oracle", "--limit", "1",
                 "--env-arg", f"index={tmp_path / 'none'}", "--out", str(tmp_path / "a")])
    assert code != 0 and "build one with `tir-envs index build" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()
    code = main(["bench", "--suite", "hotpotqa", "--policy", "oracle", "--limit", "1",
                 "--env-arg", f"index={own_index}", "--env-arg", f"retriever={own_index}",
                 "--out", str(tmp_path / "b")])
    assert code != 0 and "give the search index once" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_the_autotir_env_searches_the_index_given(own_index, qwen_tok):
    from tir_envs.envs.autotir import AutoTIREnv

    env = AutoTIREnv(tokenizer=qwen_tok, index=str(own_index),
                     tasks=[{"question": "Where is Zorblax Quendrith?", "answer": "here",
                             "domain": "knowledge", "tool": "search"}])
    try:
        env.reset(seed=0)
        env.step(f"<think>Look it up.</think><search>{MARKER}</search>")
        result = env.trajectory.turns[0].tool_results[0]
        assert result["status"] == "ok" and result["docids"] == ["z1"]
    finally:
        env.close()
