"""Search backends on the HotpotQA paragraph corpus: speed and recall of the gold paragraphs.

Prints one JSON object with an entry per backend:
  * ``single_qps``: queries/s, one ``search(q, 10)`` after another on one Python thread;
  * ``batch_qps``: queries/s of one ``batch_search`` over all questions (1 search thread) and
    ``batch_qps_threads``: the same with one search thread per CPU (Lucene runs them in Java);
    ``batch_qps_k3``: one-thread batch at Search-R1's top-3 (less document text to fetch);
  * ``recall@1/5/10``: the share of the gold supporting paragraphs (2 per question) found in
    the top 1/5/10, over the 1100 shipped HotpotQA dev-distractor questions;
  * ``*_vs_bm25``: throughput as a ratio to the in-process BM25 backend measured in the same run.
Backends: ``lucene`` (pyserini/Anserini, in-process JVM), ``bm25`` (bm25s, no Java), ``http``
(the retrieval server over the Lucene index, through the HTTP client), and ``dense`` when
``--dense-model`` names a local sentence-embedding model folder (none ships with the package).
Goal: Lucene BM25 batched >= 1000 q/s.

    python benchmarks/perf/search.py [--dense-model PATH] [--dense-prefixes e5]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tir_envs.bench.perf.quick import QUICK, pick  # noqa: E402

from tir_envs.data.qa import load_qa  # noqa: E402
from tir_envs.tools.search import build_index, open_retriever  # noqa: E402
from tir_envs.tools.search.hotpotqa import write_hotpotqa_corpus  # noqa: E402
from tir_envs.tools.search.jvm import lucene_available  # noqa: E402
from tir_envs.tools.search.server import RetrievalServer  # noqa: E402

K = 10


def recall(tasks, results) -> dict[str, float]:
    out = {}
    for k in (1, 5, 10):
        found = [len(set(t.meta["supporting_titles"]) & {h.title for h in hits[:k]})
                 / len(t.meta["supporting_titles"]) for t, hits in zip(tasks, results)]
        out[f"recall@{k}"] = round(sum(found) / len(found), 4)
    return out


def measure(retriever, queries: list[str], warmup_passes: int = pick(4, 1)) -> dict:
    """Steady-state figures: the JVM's JIT needs a few thousand queries before Lucene runs at
    full speed (as it will in any training run), so every backend is warmed up alike."""
    for _ in range(warmup_passes):
        retriever.batch_search(queries, K)
    for q in queries[:500]:
        retriever.search(q, K)
    t = time.perf_counter()
    for q in queries:
        retriever.search(q, K)
    single = len(queries) / (time.perf_counter() - t)
    t = time.perf_counter()
    results = retriever.batch_search(queries, K, threads=1)
    batch = len(queries) / (time.perf_counter() - t)
    threads = os.cpu_count() or 1
    t = time.perf_counter()
    retriever.batch_search(queries, K, threads=threads)
    batch_threads = len(queries) / (time.perf_counter() - t)
    t = time.perf_counter()
    retriever.batch_search(queries, 3, threads=1)
    batch_k3 = len(queries) / (time.perf_counter() - t)
    return {"single_qps": round(single, 1), "batch_qps": round(batch, 1),
            "batch_qps_threads": round(batch_threads, 1), "threads": threads,
            "batch_qps_k3": round(batch_k3, 1)}, results


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dense-model", help="local sentence-embedding model folder")
    parser.add_argument("--dense-prefixes", choices=["none", "e5"], default="none",
                        help="e5: 'query: ' / 'passage: ' prefixes")
    args = parser.parse_args(argv)
    tasks = load_qa("hotpotqa_distractor")[:pick(None, 40)]
    queries = [t.question for t in tasks]
    report: dict = {"corpus": "hotpotqa paragraphs (10,785)", "queries": len(queries), "k": K,
                    "cpu_count": os.cpu_count(), "loadavg_before": os.getloadavg()[0],
                    "backends": {}}
    with tempfile.TemporaryDirectory(prefix="tir-search-perf-") as tmp:
        corpus = write_hotpotqa_corpus(Path(tmp) / "corpus.jsonl")
        backends = ["bm25"] + (["lucene", "http"] if lucene_available() and not QUICK else [])
        if args.dense_model:
            backends.append("dense")
        for name in backends:
            report["backends"][name] = run_backend(name, corpus, Path(tmp), tasks, queries, args)
        if not lucene_available():
            report["backends"]["lucene"] = {"skipped": "no Java 21 / pyserini jar here"}
        if not args.dense_model:
            report["backends"]["dense"] = {"skipped": "no local embedding model; pass "
                                                      "--dense-model PATH"}
    base = report["backends"]["bm25"]
    for entry in report["backends"].values():
        for key in ("single_qps", "batch_qps"):
            if key in entry:
                entry[f"{key.split('_')[0]}_vs_bm25"] = round(entry[key] / base[key], 2)
    lucene = report["backends"].get("lucene", {})
    best = max(lucene.get("batch_qps", 0), lucene.get("batch_qps_threads", 0))
    report["goal"] = {"lucene_batched_qps_min": 1000, "met": best >= 1000}
    report["loadavg_after"] = os.getloadavg()[0]  # other processes competing for the CPUs
    print(json.dumps(report, indent=2))
    return report


def run_backend(name, corpus, tmp, tasks, queries, args) -> dict:
    if name == "http":
        with RetrievalServer(tmp / "lucene", threads=os.cpu_count() or 1) as server:
            retriever = open_retriever(server.url)
            stats, results = measure(retriever, queries)
            retriever.close()
        return {**stats, **recall(tasks, results), "build_s": None}
    options = {}
    if name == "dense":
        prefixes = ("query: ", "passage: ") if args.dense_prefixes == "e5" else ("", "")
        options = {"model": args.dense_model, "query_prefix": prefixes[0],
                   "passage_prefix": prefixes[1]}
    t = time.perf_counter()
    index = build_index(corpus, tmp / name, backend=name, **options)
    build_s = round(time.perf_counter() - t, 2)
    with open_retriever(index) as retriever:
        stats, results = measure(retriever, queries)
    return {**stats, **recall(tasks, results), "build_s": build_s}


if __name__ == "__main__":
    main()
