"""The streaming bm25 build: memory bounded by a chunk of passages, and an index whose scores
equal those of bm25s indexing the whole corpus in memory (real bm25s on the HotpotQA
paragraphs), readable by bm25s itself, loaded or memory-mapped."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("bm25s")

from tests.search_helpers import hotpotqa_corpus  # noqa: E402
from tir_envs.data.qa import load_qa  # noqa: E402
from tir_envs.tools.search import bm25_build, build_index  # noqa: E402
from tir_envs.tools.search.bm25 import BM25Retriever  # noqa: E402
from tir_envs.tools.search.corpus import iter_corpus, read_manifest  # noqa: E402


@pytest.fixture(scope="module")
def streamed(tmp_path_factory):
    chunks = []
    tokenize = bm25_build.tokenize

    def spy(texts, stem):
        chunks.append(len(texts))
        return tokenize(texts, stem)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bm25_build, "CHUNK", 2000)
        mp.setattr(bm25_build, "tokenize", spy)
        out = build_index(hotpotqa_corpus(), tmp_path_factory.mktemp("s") / "bm25",
                          backend="bm25")
    return out, chunks


def test_the_build_reads_a_chunk_at_a_time(streamed):
    out, chunks = streamed
    assert chunks == [2000] * 5 + [785]  # 10,785 paragraphs, never all at once
    manifest = read_manifest(out)
    assert manifest["streamed"] and manifest["num_docs"] == 10785
    assert manifest["postings"] > manifest["vocabulary"] > 10_000


def test_scores_equal_bm25s_indexing_the_whole_corpus_in_memory(streamed):
    out, _ = streamed
    in_memory = BM25Retriever(list(iter_corpus(hotpotqa_corpus())))
    loaded, mapped = BM25Retriever.load(out), BM25Retriever.load(out, mmap=True)
    questions = [t.question for t in load_qa("hotpotqa_distractor")[:200]]
    for q in questions:
        tokens = in_memory._tokenize([q])[0]
        expected = in_memory.model.get_scores(tokens)
        assert np.allclose(loaded.model.get_scores(tokens), expected, rtol=1e-6, atol=1e-6)
        assert np.count_nonzero(expected) > 0
    assert loaded.batch_search(questions, 10) == in_memory.batch_search(questions, 10)
    assert mapped.batch_search(questions, 10) == in_memory.batch_search(questions, 10)
