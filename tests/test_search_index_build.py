"""``tir-envs index build`` at scale: every corpus format, bad records, interrupted builds.

Real Lucene (a ``java`` subprocess) and real bm25s; the interrupted build is a real
``tir-envs index build`` process killed with SIGKILL while it indexes.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.search_helpers import SMALL_DOCS, SMALL_QUERIES
from tir_envs.cli import main
from tir_envs.data.loaders import DatasetError
from tir_envs.tools.search import build_index, open_retriever
from tir_envs.tools.search.corpus import (BUILDER_FILE, CorpusStats, building, iter_corpus,
                                          read_manifest, scratch_folder)
from tir_envs.tools.search.jvm import lucene_available

needs_lucene = pytest.mark.skipif(not lucene_available(), reason="needs Java 21 + pyserini jar")
ROOT = Path(__file__).resolve().parents[1]


def _flashrag(docs) -> list[dict]:
    return [{"id": d["id"], "contents": f'"{d["title"]}"\n{d["text"]}'} for d in docs]


def _write_jsonl(path: Path, rows, compress: bool = False) -> Path:
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if compress:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text)
    return path


def _write_parquet(path: Path, rows) -> Path:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=3)
    return path


def test_every_format_reads_the_same_documents(tmp_path):
    expected = _flashrag(SMALL_DOCS)
    files = {
        "flashrag": _write_jsonl(tmp_path / "c.jsonl", expected),
        "title_text": _write_jsonl(tmp_path / "t.jsonl", SMALL_DOCS),
        "gzip": _write_jsonl(tmp_path / "c.jsonl.gz", SMALL_DOCS, compress=True),
        "parquet": _write_parquet(tmp_path / "c.parquet", SMALL_DOCS),
        "parquet_contents": _write_parquet(tmp_path / "f.parquet", expected),
    }
    for name, path in files.items():
        assert list(iter_corpus(path)) == expected, name


@needs_lucene
@pytest.mark.parametrize("backend", ["lucene", "bm25"])
def test_parquet_corpus_builds_a_searchable_index(tmp_path, backend):
    corpus = _write_parquet(tmp_path / "c.parquet", SMALL_DOCS)
    out = build_index(corpus, tmp_path / "idx", backend=backend, threads=2) \
        if backend == "lucene" else build_index(corpus, tmp_path / "idx", backend=backend)
    manifest = read_manifest(out)
    assert manifest["num_docs"] == len(SMALL_DOCS) and manifest["skipped"] == 0
    assert manifest["peak_rss_mb"] > 0 and manifest["index_bytes"] > 0
    with open_retriever(out) as r:
        for query, docid in SMALL_QUERIES.items():
            hit = r.search(query, 1)[0]
            assert hit.docid == docid
        assert r.search("capital of France", 1)[0].contents.startswith('"Paris"\n')
    assert not scratch_folder(Path(out)).exists()


def _corrupted(tmp_path: Path) -> Path:
    lines = [json.dumps(d) for d in SMALL_DOCS]
    lines[2] = '{"id": "hamlet", "title": "Hamlet", "text": "unterminated'
    lines[5] = json.dumps({"id": "nile", "contents": 42})
    return Path(tmp_path / "bad.jsonl").resolve(), lines


def test_a_corrupted_line_is_named_and_skip_bad_counts_it(tmp_path):
    path, lines = _corrupted(tmp_path)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError, match=r"bad\.jsonl:3: invalid JSON .*column"):
        list(iter_corpus(path))
    stats = CorpusStats()
    docs = list(iter_corpus(path, skip_bad=True, stats=stats))
    assert [d["id"] for d in docs] == [d["id"] for i, d in enumerate(SMALL_DOCS)
                                       if i not in (2, 5)]
    assert stats.skipped == 2 and stats.read == len(SMALL_DOCS) - 2
    assert "bad.jsonl:6: field 'contents' must be a string, got int" in stats.errors[1]
    parquet = _write_parquet(tmp_path / "bad.parquet",
                             [{"id": "a", "text": "ok"}, {"id": "b", "text": None}])
    with pytest.raises(DatasetError, match=r"bad\.parquet:row 2: a document needs"):
        list(iter_corpus(parquet))


@pytest.mark.parametrize("backend", ["bm25", pytest.param("lucene", marks=needs_lucene)])
def test_cli_build_stops_at_a_bad_line_or_skips_and_counts(tmp_path, capsys, backend):
    path, lines = _corrupted(tmp_path)
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "idx"
    assert main(["index", "build", "--corpus", str(path), "--out", str(out),
                 "--backend", backend, "--no-progress"]) != 0
    assert "bad.jsonl:3: invalid JSON" in capsys.readouterr().err
    assert not out.exists() and not scratch_folder(out).exists()
    assert main(["index", "build", "--corpus", str(path), "--out", str(out),
                 "--backend", backend, "--skip-bad"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out.strip().splitlines()[-1])
    assert report["num_docs"] == len(SMALL_DOCS) - 2 and report["skipped"] == 2
    assert "bad.jsonl:3" in report["skipped_examples"][0]
    assert "2 skipped" in captured.err and "peak RSS" in captured.err
    with open_retriever(out) as r:
        assert r.num_docs == len(SMALL_DOCS) - 2


def _big_corpus(path: Path, n: int) -> Path:
    words = [f"w{i}" for i in range(5000)]
    with path.open("w") as f:
        for i in range(n):
            text = " ".join(words[(i * 7 + j * 13) % 5000] for j in range(60))
            f.write(json.dumps({"id": str(i), "title": f"Doc {i}", "text": text}) + "\n")
    return path


def _java_writing(folder: Path) -> list[int]:
    """Pids of live processes whose command line names ``folder``."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(folder) in (proc / "cmdline").read_text():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


@needs_lucene
def test_an_interrupted_build_leaves_no_index_and_the_rerun_succeeds(tmp_path):
    corpus = _big_corpus(tmp_path / "big.jsonl", 40_000)
    out = tmp_path / "idx"
    scratch = scratch_folder(out)
    cmd = [sys.executable, "-m", "tir_envs.cli", "index", "build", "--corpus", str(corpus),
           "--out", str(out), "--backend", "lucene", "--threads", "2", "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while not (scratch / "_index").exists():  # Java is indexing: mid-way through the build
        assert proc.poll() is None, f"the build ended before it could be interrupted: " \
                                    f"{proc.communicate()}"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not out.exists() and scratch.exists()
    for _ in range(200):  # the indexer dies with its parent (no orphan writes on)
        if not _java_writing(scratch):
            break
        time.sleep(0.05)
    assert not _java_writing(scratch)
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert "left by an interrupted build" in rerun.stderr
    assert not scratch.exists()
    assert read_manifest(out)["num_docs"] == 40_000
    with open_retriever(out) as r:
        assert r.search("12345", 1)[0].docid == "12345"


def test_a_scratch_folder_of_a_running_build_is_refused_with_the_fix(tmp_path):
    out = tmp_path / "idx"
    scratch = scratch_folder(out)
    scratch.mkdir()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        import socket
        (scratch / BUILDER_FILE).write_text(f"{sleeper.pid} {socket.gethostname()}\n")
        with pytest.raises(FileExistsError, match=rf"running build \(pid {sleeper.pid}\).*"
                                                  rf"kill {sleeper.pid}"):
            with building(out):
                pass
    finally:
        sleeper.kill()
        sleeper.wait()
    with building(out) as tmp:  # its builder is gone now: the leftover is cleared
        (tmp / "x").write_text("done")
    assert (out / "x").read_text() == "done" and not scratch.exists()
    with pytest.raises(FileExistsError, match="--overwrite"):
        with building(out):
            pass
    with pytest.raises(RuntimeError):  # a failing build leaves the old index in place
        with building(out, overwrite=True) as tmp:
            (tmp / "x").write_text("half")
            raise RuntimeError("interrupted")
    assert (out / "x").read_text() == "done" and not scratch.exists()


def test_duplicate_ids_are_found_across_batches_and_skippable(tmp_path):
    from tir_envs.tools.search.corpus import IdSet
    rows = [{"id": str(i % 9000), "contents": f"doc {i}"} for i in range(9005)]
    path = _write_jsonl(tmp_path / "dup.jsonl", rows)
    with pytest.raises(DatasetError, match=r"dup\.jsonl:9001: duplicate document id '0'"):
        list(iter_corpus(path))
    stats = CorpusStats()
    assert len(list(iter_corpus(path, skip_bad=True, stats=stats))) == 9000
    assert stats.skipped == 5
    ids = IdSet()
    assert ids.add_batch(["a", "b", "a", None]) == [False, False, True, False]
    for n in range(50):  # many runs, merged as they grow
        assert ids.add_batch([f"x{n}-{j}" for j in range(100)]) == [False] * 100
    assert ids.add_batch(["x7-3", "b", "new", "x49-99"]) == [True, True, False, True]


def test_a_memory_mapped_bm25_index_answers_like_the_loaded_one(tmp_path):
    corpus = _write_jsonl(tmp_path / "c.jsonl", SMALL_DOCS)
    out = build_index(corpus, tmp_path / "idx", backend="bm25")
    with open_retriever(out) as loaded, open_retriever(out, mmap=True) as mapped:
        assert mapped.num_docs == loaded.num_docs == len(SMALL_DOCS)
        assert isinstance(mapped.model.scores["data"], np.memmap)
        for query in list(SMALL_QUERIES) + ["river", "capital"]:
            assert mapped.search(query, 5) == loaded.search(query, 5)
        assert mapped.batch_search(list(SMALL_QUERIES), 3) == \
            loaded.batch_search(list(SMALL_QUERIES), 3)
