"""Dense retrieval with faiss: exact (Flat) and approximate (IVF, HNSW, PQ) indexes built by
streaming a corpus through a tiny encoder made in code, a faiss file built elsewhere adopted in
place (FlashRAG's e5 index layout), and a dense index served by the retrieval server."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("faiss")
pytest.importorskip("torch")

from tests.search_helpers import paragraphs_corpus, tiny_encoder  # noqa: E402
from tir_envs.cli import main  # noqa: E402
from tir_envs.data.loaders import DatasetError  # noqa: E402
from tir_envs.tools.search import build_index, open_retriever  # noqa: E402
from tir_envs.tools.search import dense  # noqa: E402
from tir_envs.tools.search.corpus import iter_corpus, read_manifest, scratch_folder  # noqa: E402
from tir_envs.tools.search.dense import DenseRetriever, import_faiss_index  # noqa: E402

K = 10


@pytest.fixture(scope="module")
def corpus():
    return paragraphs_corpus(600)


@pytest.fixture(scope="module")
def queries(corpus):
    docs = list(iter_corpus(corpus))
    return [d["contents"].split("\n", 1)[1][:80] for d in docs[::20]]


def _build(corpus, out, spec, **options):
    return build_index(corpus, out, backend="dense", model=tiny_encoder(), faiss_index=spec,
                       **options)


@pytest.fixture(scope="module")
def flat(corpus, tmp_path_factory):
    return _build(corpus, tmp_path_factory.mktemp("dense") / "flat", "Flat")


def _ids(retriever, queries):
    return [[h.docid for h in hits] for hits in retriever.batch_search(queries, K)]


def _recall(approx, exact) -> float:
    return float(np.mean([len(set(a) & set(e)) / len(e) for a, e in zip(approx, exact)]))


def test_flat_finds_each_passage_by_its_own_text(flat, corpus):
    manifest = read_manifest(flat)
    assert manifest["faiss_index"] == "Flat" and manifest["num_docs"] == 600
    assert manifest["trained_on"] == 0 and manifest["peak_rss_mb"] > 0
    docs = list(iter_corpus(corpus))
    with open_retriever(flat) as r:
        for doc in docs[::50]:
            hit = r.search(doc["contents"], 1)[0]
            assert hit.docid == doc["id"] and hit.score == pytest.approx(1.0, abs=1e-4)
            assert hit.contents == doc["contents"]


def test_the_build_streams_in_batches_and_trains_on_a_sample(corpus, tmp_path, monkeypatch):
    sizes = []
    encode = dense.Encoder.encode

    def spy(self, texts):
        sizes.append(len(texts))
        return encode(self, texts)

    monkeypatch.setattr(dense, "ADD_BATCH", 128)
    monkeypatch.setattr(dense.Encoder, "encode", spy)
    out = _build(corpus, tmp_path / "ivf", "IVF8,Flat", train_size=200)
    # one training sample of 200, then the corpus 128 passages at a time: never all at once
    assert sizes == [200, 128, 128, 128, 128, 88]
    assert read_manifest(out)["trained_on"] == 200


@pytest.mark.parametrize("spec, params, least", [
    ("IVF8,Flat", {"nprobe": 8}, 1.0),     # every list searched: exact
    ("HNSW16", {"ef_search": 128}, 0.9),
    # 8 bytes a passage: coarse (this random encoder's vectors are crowded), far above chance
    ("PQ8np", {}, 0.25),
    ("IVF8,PQ16x4np", {"nprobe": 8}, 0.2),
])
def test_approximate_indexes_against_flat(spec, params, least, flat, corpus, queries, tmp_path):
    out = _build(corpus, tmp_path / "ann", spec, **params)
    exact = _ids(open_retriever(flat), queries)
    with open_retriever(out) as r:
        assert r.describe()["faiss_index"] == spec
        approx = _ids(r, queries)
    chance = K / 600
    assert _recall(approx, exact) >= least > 5 * chance
    if least == 1.0:
        assert approx == exact


def test_search_settings_are_stored_and_can_be_overridden(corpus, flat, queries, tmp_path):
    out = _build(corpus, tmp_path / "ivf", "IVF16,Flat", nprobe=16)
    exact = _ids(open_retriever(flat), queries)
    assert read_manifest(out)["search_params"] == {"nprobe": 16}
    assert _ids(DenseRetriever.load(out), queries) == exact
    one = DenseRetriever.load(out, nprobe=1)
    assert one.describe()["nprobe"] == 1
    assert _recall(_ids(one, queries), exact) < 1.0  # one list of 16: some neighbours missed


def test_a_memory_mapped_index_answers_like_the_loaded_one(flat, queries):
    loaded, mapped = DenseRetriever.load(flat), DenseRetriever.load(flat, mmap=True)
    assert loaded.batch_search(queries, K) == mapped.batch_search(queries, K)


def test_bad_settings_fail_before_encoding_with_the_fix(corpus, tmp_path):
    with pytest.raises(ValueError, match="factory string"):
        _build(corpus, tmp_path / "a", "Bogus12")
    with pytest.raises(ValueError, match="at least 1,024 training vectors"):
        _build(corpus, tmp_path / "b", "IVF1024,Flat")
    with pytest.raises(ValueError, match="nprobe must be a positive integer"):
        _build(corpus, tmp_path / "c", "IVF8,Flat", nprobe=0)
    for name in "abc":
        assert not (tmp_path / name).exists() and not scratch_folder(tmp_path / name).exists()


def test_a_bad_line_stops_the_build_with_nothing_left_or_is_skipped(corpus, tmp_path):
    bad = tmp_path / "bad.jsonl"
    lines = corpus.read_text().splitlines()
    bad.write_text("\n".join(lines[:300] + ["{not json"] + lines[300:]) + "\n")
    with pytest.raises(DatasetError, match=r"bad.jsonl:301: invalid JSON"):
        _build(bad, tmp_path / "x", "Flat")
    assert not (tmp_path / "x").exists() and not scratch_folder(tmp_path / "x").exists()
    out = _build(bad, tmp_path / "x", "Flat", skip_bad=True)
    manifest = read_manifest(out)
    assert manifest["skipped"] == 1 and manifest["num_docs"] == 600


def test_a_faiss_file_built_elsewhere_is_adopted_in_place(corpus, flat, queries, tmp_path):
    import faiss

    from tir_envs.tools.search.encoder import Encoder
    # FlashRAG's layout: a Flat inner-product faiss file of the normalised "passage: " embeddings
    docs = list(iter_corpus(corpus))
    vectors = Encoder(tiny_encoder()).encode(["passage: " + d["contents"] for d in docs])
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    faiss.write_index(index, str(tmp_path / "e5_Flat.index"))
    code = main(["index", "import-faiss", "--faiss", str(tmp_path / "e5_Flat.index"),
                 "--corpus", str(corpus), "--model", str(tiny_encoder()),
                 "--out", str(tmp_path / "wiki")])
    assert code == 0
    manifest = read_manifest(tmp_path / "wiki")
    assert manifest["imported"] and manifest["docs_file"] == str(corpus.resolve())
    assert not (tmp_path / "wiki" / "docs.jsonl").exists()  # nothing copied
    built = DenseRetriever.load(_build(corpus, tmp_path / "own", "Flat", query_prefix="query: ",
                                       passage_prefix="passage: "))
    with open_retriever(tmp_path / "wiki") as adopted:
        assert adopted.describe()["num_docs"] == 600
        assert _ids(adopted, queries) == _ids(built, queries)
        hit = adopted.search(docs[7]["contents"], 1)[0]
        assert (hit.docid, hit.contents) == (docs[7]["id"], docs[7]["contents"])


def test_an_import_that_does_not_match_its_corpus_or_model_is_refused(corpus, tmp_path):
    import faiss
    index = faiss.IndexFlatIP(32)
    index.add(np.eye(32, dtype=np.float32)[:5])
    faiss.write_index(index, str(tmp_path / "five.index"))
    with pytest.raises(ValueError, match="holds 5 vectors but .* has 600 passages"):
        import_faiss_index(tmp_path / "five.index", corpus, tmp_path / "o", tiny_encoder())
    small = tmp_path / "five.jsonl"
    small.write_text("".join(corpus.read_text().splitlines(True)[:5]))
    wide = faiss.IndexFlatIP(48)
    wide.add(np.zeros((5, 48), np.float32))
    faiss.write_index(wide, str(tmp_path / "wide.index"))
    with pytest.raises(ValueError, match="48-dimensional vectors but the model"):
        import_faiss_index(tmp_path / "wide.index", small, tmp_path / "o", tiny_encoder())
    with pytest.raises(ValueError, match="plain JSONL"):
        import_faiss_index(tmp_path / "five.index", tmp_path / "c.jsonl.gz", tmp_path / "o",
                           tiny_encoder())
    assert not (tmp_path / "o").exists()


def test_the_cli_builds_an_ivf_index_and_the_server_serves_it(corpus, flat, queries, tmp_path,
                                                               capsys):
    from tir_envs.tools.search.client import HttpRetriever
    from tir_envs.tools.search.server import RetrievalServer

    out = tmp_path / "cli"
    assert main(["index", "build", "--corpus", str(corpus), "--out", str(out), "--backend",
                 "dense", "--model", str(tiny_encoder()), "--faiss-index", "IVF8,Flat",
                 "--nprobe", "8", "--no-progress"]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed["faiss_index"] == "IVF8,Flat" and printed["num_docs"] == 600
    direct = DenseRetriever.load(out).batch_search(queries, K)
    with RetrievalServer(out, mmap=True) as server:
        client = HttpRetriever(server.url)
        assert client.info()["faiss_index"] == "IVF8,Flat" and client.info()["nprobe"] == 8
        assert client.batch_search(queries, K) == [
            [type(h)(h.docid, pytest.approx(h.score, abs=1e-5), h.contents) for h in hits]
            for hits in direct]


def test_a_flat_index_converts_to_ivf_without_encoding_again(flat, queries, tmp_path,
                                                             monkeypatch):
    calls = []
    monkeypatch.setattr(dense.Encoder, "encode", lambda self, texts: calls.append(texts))
    assert main(["index", "convert", "--from", str(flat), "--out", str(tmp_path / "ivf"),
                 "--faiss-index", "IVF8,Flat", "--nprobe", "8"]) == 0
    assert calls == []  # the vectors came from the Flat index
    manifest = read_manifest(tmp_path / "ivf")
    assert manifest["faiss_index"] == "IVF8,Flat" and manifest["trained_on"] == 600
    assert manifest["docs_file"] == str((flat / "docs.jsonl").resolve())
    assert not (tmp_path / "ivf" / "docs.jsonl").exists()
    monkeypatch.undo()
    exact = DenseRetriever.load(flat).batch_search(queries, K)
    converted = DenseRetriever.load(tmp_path / "ivf").batch_search(queries, K)
    assert [[h.docid for h in hits] for hits in converted] == \
        [[h.docid for h in hits] for hits in exact]  # all 8 lists searched: exact
    with pytest.raises(ValueError, match="only a 'Flat' one keeps the vectors"):
        dense.convert_dense_index(tmp_path / "ivf", tmp_path / "again", "HNSW16")
