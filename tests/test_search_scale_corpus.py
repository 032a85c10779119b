"""``benchmarks/perf/search_scale.py --corpus``: the scale benchmark on real text, as a user with
wiki-18 runs it (here the shipped HotpotQA paragraphs stand in for the corpus file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tir_envs.bench.perf import search_scale
from tir_envs.data.qa import hotpotqa_paragraphs


def _real_corpus(path: Path, n: int, offset: int = 0) -> list[dict]:
    """``n`` shipped Wikipedia paragraphs as a ``{"id","title","text"}`` JSONL corpus."""
    docs = hotpotqa_paragraphs()[offset:offset + n]
    with path.open("w", encoding="utf-8") as f:
        for i, d in enumerate(docs):
            f.write(json.dumps({"id": f"w{i}", "title": d["title"], "text": d["text"]}) + "\n")
    return docs


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_samples_are_nested_uniform_subsets_with_the_golds_planted(tmp_path):
    source = tmp_path / "wiki.jsonl"
    _real_corpus(source, 400, offset=5000)
    golds = hotpotqa_paragraphs()[:7]
    paths = search_scale.sample_corpus(source, [60, 250], golds, tmp_path / "out")
    small, large = _read(paths[60]), _read(paths[250])
    assert (len(small), len(large)) == (60, 250)
    source_ids = {r["id"] for r in _read(source)}
    picked = lambda rows: {r["id"] for r in rows if not r["id"].startswith("tir-gold-")}  # noqa: E731
    assert len(picked(small)) == 53 and len(picked(large)) == 243
    assert picked(small) <= picked(large) <= source_ids  # nested, drawn from the source
    for rows in (small, large):
        planted = [r["contents"] for r in rows if r["id"].startswith("tir-gold-")]
        assert planted == [f'"{d["title"]}"\n{d["text"]}' for d in golds]
        assert len({r["id"] for r in rows}) == len(rows)
    # uniform over the file, not its head: the large sample reaches its last quarter
    assert any(int(i[1:]) >= 300 for i in picked(large))
    # the same seed draws the same sample
    again = search_scale.sample_corpus(source, [60], golds, tmp_path / "again")
    assert _read(again[60]) == small


def test_a_corpus_too_small_for_the_sizes_is_refused_before_writing(tmp_path):
    source = tmp_path / "wiki.jsonl"
    _real_corpus(source, 50)
    with pytest.raises(SystemExit, match=r"has 50 passages.*pass smaller --sizes"):
        search_scale.sample_corpus(source, [100], [], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_text_stats_count_what_the_questions_words_match(tmp_path):
    corpus = tmp_path / "c.jsonl"
    texts = ["alpha beta", "beta gamma", "delta", "the of alpha"]
    corpus.write_text("".join(json.dumps({"id": str(i), "contents": t}) + "\n"
                              for i, t in enumerate(texts)))
    stats = search_scale.text_stats(corpus, len(texts), ["Alpha?", "gamma and the", "zeta"],
                                    sample=4)
    # "Alpha?" matches 2 of 4 passages, "gamma" 1 (stopwords never count), "zeta" none
    assert stats == {"passages_sampled": 4, "question_match_median": 0.25,
                     "question_word_df_mean": round((0.5 + 0.25 + 0.0) / 3, 4)}


def test_the_benchmark_runs_on_a_real_corpus(tmp_path, capsys):
    source = tmp_path / "wiki.jsonl"
    _real_corpus(source, 3000, offset=4000)
    report = search_scale.main(["--corpus", str(source), "--sizes", "700", "1400",
                                "--backends", "bm25", "--clients", "--dense-size", "0"])
    assert report["corpus"]["source"] == str(source) and "text_model" not in report
    for size in (700, 1400):
        entry = report["sizes"][size]
        assert "error" not in entry["bm25"], entry["bm25"]
        assert 0 < entry["text_stats"]["question_match_median"] < 1
        assert entry["bm25"]["recall@10"] > 0.5  # the planted golds are found
    assert "bm25_scaling" in report
    assert json.loads(capsys.readouterr().out)["corpus"]["source"] == str(source)
