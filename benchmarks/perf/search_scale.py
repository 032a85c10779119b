"""Search at growing corpus sizes: Lucene and bm25s side by side, measured, then projected.

A synthetic corpus stands in for Wikipedia: passages of 100 words (wiki-18's passage size),
words drawn from a Zipf law whose exponent and vocabulary growth (Heaps' law) are fitted to the
10,785 HotpotQA paragraphs the package ships; the most frequent ranks are those paragraphs' own
words (so stopwords and common terms behave as in real text), rarer ranks synthetic words.  The
gold supporting paragraphs of ``QUESTIONS`` shipped HotpotQA questions are planted at random
positions, so recall@k of the golds stays measurable at every size (an optimistic recall:
synthetic passages share only vocabulary statistics with the questions, not topics).

For each size and backend, in a child process of its own (so peak RSS is that backend's):
  * ``build_s``, ``index_mb``, ``build_peak_rss_mb`` (Python + the ``java`` indexer);
  * ``single_qps`` and ``p50_ms``/``p99_ms``: one ``search(q, 10)`` after another, one thread,
    after a warm-up (the JVM's JIT); ``single_qps_median`` = 1000 / p50 (what a core that is
    not shared would sustain: on a loaded machine the mean is dominated by preemptions);
    ``batch_qps``: one ``batch_search`` of all queries;
  * ``recall@1/5/10`` of the planted golds; ``serve_peak_rss_mb``: the searching process;
    ``baseline_rss_mb``: that process before it built anything (interpreter and QA data).
Then, over the largest Lucene index, the retrieval server under 64 and 256 concurrent
clients: one worker, one with request batching, two worker processes (``server_load``: q/s, p50/p99, the queueing
floor, mean batch, errors, wrong answers).
Then ``growth_per_10x`` (each figure's ratio between the two largest sizes) and a power-law
projection to 1 M and 21 M passages (wiki-18), labelled ``projected``.
``--corpus FILE`` measures real text instead: nested uniform samples of ``FILE`` at each size
(wiki-18's ``psgs_w100`` JSONL, or any corpus ``index build`` reads), the same golds planted.
Every size reports ``text_stats``: the median share of passages that contain a question's
words (what Lucene scores per query) and those words' mean document frequency, so a synthetic
run and a real one can be compared on what drives per-query cost.
``--with-1m`` adds the 1 M size (and its server load test, ``server_load_1m`` lines on stderr:
64 and 256 clients, p50/p99 against the queueing floor, errors and wrong answers).

Dense (``dense``): at ``--dense-size`` passages, faiss ``Flat`` (exact) and the approximate
IVF, HNSW and PQ indexes built from the same embeddings by ``tir-envs index build --backend
dense``, each with its build time, file size, search-only p50 (queries encoded beforehand, so
the figure is faiss's, not the encoder's) and ``recall@10_vs_flat``: the share of the exact
top 10 each approximate index returns, over the settings ``nprobe`` / ``efSearch``.  The
encoder is ``--dense-model`` (a local folder), else a random 1-layer BERT (hidden 64) over the
shipped Qwen2.5 vocabulary built in code: its embeddings are crowded (random weights), which
makes approximate search harder than over a trained encoder's, so its recall is pessimistic.

    python benchmarks/perf/search_scale.py [--sizes 10000 100000] [--threads 2]
    python benchmarks/perf/search_scale.py --with-1m           # 10k, 100k and 1M (an hour+)
    PERF_QUICK=1 python benchmarks/perf/search_scale.py      # 2,000 passages, seconds
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tir_envs.bench.perf.quick import QUICK, pick  # noqa: E402
from tir_envs.bench.perf.search import recall  # noqa: E402

K = 10
WORDS_PER_PASSAGE = 100  # wiki-18 (DPR) splits Wikipedia into 100-word passages
WIKI18_PASSAGES = 21_015_324
QUESTIONS = pick(300, 30)
_WORD = re.compile(r"\w+")


def fit_text_model() -> dict:
    """Zipf exponent, Heaps' law and ranked vocabulary of the shipped HotpotQA paragraphs."""
    from tir_envs.data.qa import hotpotqa_paragraphs
    tokens = [w.lower() for d in hotpotqa_paragraphs() for w in _WORD.findall(d["text"])]
    counts = collections.Counter(tokens)
    ranked = [w for w, _ in counts.most_common()]
    freq = np.array([counts[w] for w in ranked], dtype=float)
    ranks = np.arange(1, len(freq) + 1)
    sel = slice(9, min(5000, len(freq)))  # the straight part of the log-log curve
    zipf_s = -np.polyfit(np.log(ranks[sel]), np.log(freq[sel]), 1)[0]
    seen, n_points, distinct = set(), [], []
    for i, w in enumerate(tokens, 1):  # vocabulary size as the text grows: V = k * N^beta
        seen.add(w)
        if i % 20_000 == 0:
            n_points.append(i)
            distinct.append(len(seen))
    beta, log_k = np.polyfit(np.log(n_points), np.log(distinct), 1)
    return {"zipf_s": float(zipf_s), "heaps_k": float(math.exp(log_k)), "heaps_beta": float(beta),
            "sample_tokens": len(tokens), "sample_vocabulary": len(ranked), "ranked": ranked}


def synthetic_word(rank: int) -> str:
    """A letters-only word for a rank beyond the sample's vocabulary (stable, unique)."""
    letters = "bcdfghjklmnpqrstvwxz"
    out = ""
    while True:
        rank, r = divmod(rank, len(letters))
        out += letters[r]
        if rank == 0:
            return "q" + out + "o"


def write_corpus(path: Path, size: int, model: dict, golds: list[dict], seed: int = 0) -> None:
    """``size`` passages as FlashRAG JSONL: ``len(golds)`` planted, the rest synthetic."""
    rng = np.random.default_rng(seed)
    n_syn = size - len(golds)
    vocab = int(model["heaps_k"] * (n_syn * WORDS_PER_PASSAGE) ** model["heaps_beta"])
    vocab = max(vocab, 1000)
    weights = 1.0 / np.arange(1, vocab + 1) ** model["zipf_s"]
    cdf = np.cumsum(weights / weights.sum())
    ranked = model["ranked"]
    words = np.array([ranked[i] if i < len(ranked) else synthetic_word(i)
                      for i in range(vocab)], dtype=object)
    gold_at = dict(zip(rng.choice(size, len(golds), replace=False).tolist(), golds))
    with path.open("w", encoding="utf-8") as f:
        for i in range(size):
            if i in gold_at:
                contents = gold_contents(gold_at[i])
            else:
                ids = np.searchsorted(cdf, rng.random(WORDS_PER_PASSAGE + 3))
                ids = np.minimum(ids, vocab - 1)
                title = " ".join(words[ids[:3]]).title()
                contents = f'"{title}"\n' + " ".join(words[ids[3:]])
            f.write(json.dumps({"id": f"p{i}", "contents": contents}, ensure_ascii=False) + "\n")


def gold_contents(doc: dict) -> str:
    """A planted gold paragraph in FlashRAG's ``"title"\ntext`` convention."""
    return f'"{doc["title"]}"\n{doc["text"]}'


def sample_corpus(source: Path, sizes: list[int], golds: list[dict], folder: Path,
                  seed: int = 0) -> dict[int, Path]:
    """Nested uniform samples of a real corpus (``--corpus``), one file per size, each with
    the ``golds`` planted as in the synthetic corpora.  Two streaming passes over ``source``
    (any format ``index build`` reads): one counts, one writes, so memory stays at 12 bytes a
    source passage whatever the text.  Each smaller sample is a subset of the larger ones,
    as the synthetic corpora of one seed share their prefix."""
    from tir_envs.tools.search.corpus import iter_corpus
    count = sum(1 for _ in iter_corpus(source))
    need = max(sizes) - len(golds)
    if need > count:
        raise SystemExit(f"--corpus {source} has {count:,} passages; --sizes {max(sizes):,} "
                         f"needs {need:,} of them besides the {len(golds)} planted golds: "
                         "pass smaller --sizes")
    folder.mkdir(parents=True, exist_ok=True)
    rank = np.full(count, np.iinfo(np.int32).max, dtype=np.int32)
    # ranks from one permutation of the whole corpus: a size draws the same passages whatever
    # other sizes a run asks for
    rank[np.random.default_rng(seed).permutation(count)[:need]] = np.arange(need)
    keep = {size: size - len(golds) for size in sizes}
    paths = {size: folder / f"corpus-{size}.jsonl" for size in sizes}
    files = {size: path.open("w", encoding="utf-8") for size, path in paths.items()}
    try:
        for i, record in enumerate(iter_corpus(source)):
            for size, f in files.items():
                if rank[i] < keep[size]:
                    f.write(json.dumps(record, ensure_ascii=False) + "\n")
        for j, doc in enumerate(golds):
            line = json.dumps({"id": f"tir-gold-{j}", "contents": gold_contents(doc)},
                              ensure_ascii=False) + "\n"
            for f in files.values():
                f.write(line)
    finally:
        for f in files.values():
            f.close()
    return paths


#: Lucene's English stopwords (what Anserini's default analyzer drops)
STOPWORDS = frozenset("a an and are as at be but by for if in into is it no not of on or such "
                      "that the their then there these they this to was will with".split())


def _terms(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)} - STOPWORDS


def text_stats(corpus: Path, size: int, questions: list[str],
               sample: int = pick(20_000, 2_000)) -> dict:
    """What the questions' words do in this corpus, on an evenly spread sample of its
    passages: the median share of passages that contain any of a question's words (what
    Lucene must score for it), and the mean share containing each word (its document
    frequency).  Compares the synthetic model with real text (``--corpus``)."""
    step = max(1, size // sample)
    with corpus.open(encoding="utf-8") as f:
        docs = [_terms(json.loads(line)["contents"]) for i, line in enumerate(f) if i % step == 0]
    asked = [_terms(q) for q in questions]
    matched = sorted(sum(1 for d in docs if q & d) / len(docs) for q in asked)
    df = [sum(1 for d in docs if w in d) / len(docs) for q in asked for w in q]
    return {"passages_sampled": len(docs),
            "question_match_median": round(matched[len(matched) // 2], 4),
            "question_word_df_mean": round(float(np.mean(df)), 4)}


def questions_and_golds() -> tuple[list, list[dict]]:
    from tir_envs.data.qa import hotpotqa_paragraphs, load_qa
    tasks = load_qa("hotpotqa_distractor")[:QUESTIONS]
    by_title = {d["title"]: d for d in hotpotqa_paragraphs()}
    titles = sorted({t for task in tasks for t in task.meta["supporting_titles"]})
    return tasks, [by_title[t] for t in titles if t in by_title]


def rss_mb(who: int) -> float:
    return round(resource.getrusage(who).ru_maxrss / 1024, 1)


def one_backend(backend: str, corpus: Path, out: Path, threads: int) -> dict:
    """Build and measure one backend (run in a child process: its peak RSS is its own)."""
    from tir_envs.tools.search import build_index, open_retriever
    from tir_envs.tools.search.corpus import read_manifest
    tasks, _ = questions_and_golds()
    queries = [t.question for t in tasks]
    baseline = rss_mb(resource.RUSAGE_SELF)  # the interpreter, numpy and the QA data
    t0 = time.perf_counter()
    options = {"threads": threads} if backend == "lucene" else {}
    build_index(corpus, out, backend=backend, **options)
    build_s = time.perf_counter() - t0
    manifest = read_manifest(out) or {}
    build_rss = max(rss_mb(resource.RUSAGE_SELF), rss_mb(resource.RUSAGE_CHILDREN))
    with open_retriever(out) as r:
        for _ in range(pick(3, 1)):  # warm-up: the JVM's JIT, caches
            r.batch_search(queries, K)
        latencies = []
        for q in queries * pick(3, 1):
            t = time.perf_counter()
            r.search(q, K)
            latencies.append(time.perf_counter() - t)
        t = time.perf_counter()
        results = r.batch_search(queries, K)
        batch_qps = len(queries) / (time.perf_counter() - t)
    lat = np.array(latencies) * 1000
    return {"baseline_rss_mb": baseline, "build_s": round(build_s, 2), "index_mb": round(manifest["index_bytes"] / 2**20, 1),
            "build_peak_rss_mb": build_rss, "serve_peak_rss_mb": rss_mb(resource.RUSAGE_SELF),
            "single_qps": round(len(lat) / (lat.sum() / 1000), 1),
            "single_qps_median": round(1000 / float(np.percentile(lat, 50)), 1),
            "p50_ms": round(float(np.percentile(lat, 50)), 2),
            "p99_ms": round(float(np.percentile(lat, 99)), 2),
            "batch_qps": round(batch_qps, 1), **recall(tasks, results)}


def run_child(backend: str, corpus: Path, out: Path, threads: int) -> dict:
    cmd = [sys.executable, __file__, "--child", backend, "--corpus", str(corpus),
           "--out", str(out), "--threads", str(threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def server_load(index: Path, queries: list[str], clients: int, per_client: int,
                threads: int, batching: bool = False, workers: int = 1) -> dict:
    """``clients`` concurrent clients, each sending ``per_client`` single-query requests one
    after another, against one retrieval server, after one discarded pass of the same load;
    every reply checked against a direct search.
    ``queueing_floor_ms`` = clients / the saturated q/s of this same run: the p50 a perfect
    FIFO server would give with every client always waiting."""
    import asyncio

    import aiohttp

    from tir_envs.tools.search import open_retriever
    from tir_envs.tools.search.server import RetrievalServer
    with open_retriever(index) as local:
        expected = {q: [h.docid for h in hits]
                    for q, hits in zip(queries, local.batch_search(queries, K))}

    async def client(session, url, i, latencies, errors, wrong):
        for j in range(per_client):
            q = queries[(i * per_client + j) % len(queries)]
            t = time.perf_counter()
            try:
                async with session.post(url, json={"queries": [q], "topk": K}) as resp:
                    body = await resp.json()
                    if resp.status != 200:
                        errors.append(resp.status)
                        continue
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                errors.append(type(exc).__name__)
                continue
            latencies.append(time.perf_counter() - t)
            if [d["document"]["id"] for d in body["result"][0]] != expected[q]:
                wrong.append(q)

    async def run(url):
        latencies, errors, wrong = [], [], []
        conn = aiohttp.TCPConnector(limit=clients)
        async with aiohttp.ClientSession(connector=conn) as session:
            # warm-up: the same load once, discarded (the server's JIT compiles the search
            # under it, as the in-process figures are taken warm)
            await asyncio.gather(*(client(session, url, i, [], [], []) for i in range(clients)))
            t = time.perf_counter()
            await asyncio.gather(*(client(session, url, i, latencies, errors, wrong)
                                   for i in range(clients)))
            return latencies, errors, wrong, time.perf_counter() - t

    with RetrievalServer(index, threads=threads, max_pending=max(256, clients),
                         batching=batching, workers=workers) as server:
        latencies, errors, wrong, wall = asyncio.run(run(server.url + "/retrieve"))
        health = server.health()
    lat = np.array(latencies) * 1000
    qps = len(lat) / wall
    return {"clients": clients, "batching": batching, "workers": workers,
            "requests": clients * per_client,
            "mean_batch": round(health["batched_queries"] / max(1, health["batches"]), 1)
            if batching else 1.0, "qps": round(qps, 1),
            "p50_ms": round(float(np.percentile(lat, 50)), 1),
            "p99_ms": round(float(np.percentile(lat, 99)), 1),
            "queueing_floor_ms": round(clients / qps * 1000, 1),
            "p99_over_floor": round(float(np.percentile(lat, 99)) / (clients / qps * 1000), 2),
            "errors": len(errors), "wrong_answers": len(wrong),
            "loadavg": round(os.getloadavg()[0], 2)}


def tiny_encoder(folder: Path, hidden: int = 64) -> Path:
    """A random 1-layer BERT over the shipped Qwen2.5 vocabulary, saved as a local encoder."""
    import torch
    from transformers import BertConfig, BertModel

    from tir_envs.tokenizer import qwen25_tokenizer
    tok = qwen25_tokenizer()
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=1,
                        num_attention_heads=4, intermediate_size=2 * hidden,
                        max_position_embeddings=512, pad_token_id=tok.pad_token_id)
    BertModel(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def dense_specs(n: int, dim: int) -> list[tuple[str, dict, list[dict]]]:
    """``(faiss factory string, build settings, search settings to sweep)`` for ``n``
    passages of ``dim`` dimensions: IVF with about 4·sqrt(n) lists, PQ of 4 dimensions a byte
    (``np``: without faiss's polysemous training, which only its Hamming-filtered search uses
    and which took ~3 s per sub-quantiser here)."""
    nlist = 2 ** max(3, round(math.log2(4 * math.sqrt(n))))
    m = max(1, dim // 4)
    probes = [{"nprobe": p} for p in (1, 4, 16) if p <= nlist]
    return [("Flat", {}, [{}]),
            (f"IVF{nlist},Flat", {}, probes),
            ("HNSW32", {}, [{"efSearch": e} for e in (16, 64, 256)]),
            (f"PQ{m}np", {}, [{}]),
            (f"IVF{nlist},PQ{m}np", {}, probes)]


def one_dense(corpus: Path, out: Path, model: str | None) -> dict:
    """Every dense index over ``corpus``, measured against ``Flat`` (run in a child process)."""
    from tir_envs.tools.search import build_index
    from tir_envs.tools.search.corpus import read_manifest
    from tir_envs.tools.search.dense import DenseRetriever
    from tir_envs.tools.search.encoder import Encoder
    tasks, _ = questions_and_golds()
    queries = [t.question for t in tasks]
    model = model or str(tiny_encoder(out / "tiny-encoder"))
    encoder = Encoder(model)
    vectors = encoder.encode(queries)
    n = sum(1 for _ in corpus.open())
    report: dict = {"passages": n, "dim": encoder.dim, "encoder": model, "indexes": {}}
    exact = None
    for spec, build, sweep in dense_specs(n, encoder.dim):
        t = time.perf_counter()
        folder = build_index(corpus, out / spec.replace(",", "_"), backend="dense", model=model,
                             faiss_index=spec, **build)
        entry = {"build_s": round(time.perf_counter() - t, 2),
                 "faiss_mb": round((folder / "index.faiss").stat().st_size / 2**20, 2),
                 "trained_on": read_manifest(folder)["trained_on"], "settings": []}
        for params in sweep:
            r = DenseRetriever.load(folder, **params)
            lat = []
            for v in vectors:
                t = time.perf_counter()
                r.index.search(v[None], K)
                lat.append(time.perf_counter() - t)
            ids = r.index.search(vectors, K)[1]
            exact = ids if exact is None else exact
            p50 = float(np.percentile(np.array(lat) * 1000, 50))
            entry["settings"].append({
                **params, "p50_ms": round(p50, 3), "qps_median": round(1000 / p50, 1),
                "recall@10_vs_flat": round(float(np.mean(
                    [len(set(a) & set(e)) / K for a, e in zip(ids, exact)])), 4),
                **recall(tasks, r.batch_search(queries, K))})
        report["indexes"][spec] = entry
    report["peak_rss_mb"] = rss_mb(resource.RUSAGE_SELF)
    return report


def run_dense_child(corpus: Path, out: Path, model: str | None) -> dict:
    cmd = [sys.executable, __file__, "--child", "dense", "--corpus", str(corpus),
           "--out", str(out)] + (["--dense-model", model] if model else [])
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def print_server_load(rows: list[dict], passages: int) -> None:
    """The server load figures as lines on stderr (the JSON on stdout has them too)."""
    label = f"{passages // 1_000_000}m" if passages >= 1_000_000 else f"{passages // 1000}k"
    for r in rows:
        server = f"{r['workers']} worker(s)" + (", batching" if r["batching"] else "")
        print(f"server_load_{label}: {r['clients']} clients, {server}: {r['qps']} q/s, p50 "
              f"{r['p50_ms']} ms, p99 {r['p99_ms']} ms, queueing floor "
              f"{r['queueing_floor_ms']} ms (p99/floor {r['p99_over_floor']}), errors "
              f"{r['errors']}, wrong answers {r['wrong_answers']} of {r['requests']} checked",
              file=sys.stderr)


PROJECTED = ("build_s", "index_mb", "build_peak_rss_mb", "serve_peak_rss_mb", "p50_ms")


def project(small: dict, large: dict, n_small: int, n_large: int) -> dict:
    """Per-10x growth of each figure and a power-law projection to 1 M and 21 M passages."""
    growth, proj = {}, {"1M": {}, "21M": {}}
    decades = math.log10(n_large / n_small)
    for key in PROJECTED + ("single_qps_median",):
        a, b = small.get(key), large.get(key)
        if not a or not b:
            continue
        per10 = (b / a) ** (1 / decades)
        growth[key] = round(per10, 2)
        for label, n in (("1M", 1_000_000), ("21M", WIKI18_PASSAGES)):
            proj[label][key] = round(b * per10 ** math.log10(n / n_large), 1)
    return {"growth_per_10x": growth, "projected": proj}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=pick([10_000, 100_000], [2_000]))
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--backends", nargs="+", default=None)
    parser.add_argument("--clients", type=int, nargs="*", default=pick([64, 256], [8]),
                        help="server load test on the largest Lucene index")
    parser.add_argument("--with-1m", action="store_true",
                        help="measure 10k, 100k and 1M passages (the 1M server load included)")
    parser.add_argument("--dense-size", type=int, default=pick(10_000, 1_000),
                        help="passages for the dense (faiss) comparison; 0: skip it")
    parser.add_argument("--dense-model", help="local encoder folder for the dense comparison "
                                              "(default: a random tiny encoder built in code)")
    parser.add_argument("--corpus", type=Path,
                        help="measure on nested uniform samples of this real corpus (e.g. "
                             "wiki-18's JSONL) instead of the synthetic one")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.with_1m:
        args.sizes = sorted(set(args.sizes) | {10_000, 100_000, 1_000_000})
    if args.child == "dense":
        result = one_dense(args.corpus, Path(args.out), args.dense_model)
        print(json.dumps(result))
        return result
    if args.child:
        result = one_backend(args.child, args.corpus, Path(args.out), args.threads)
        print(json.dumps(result))
        return result
    from tir_envs.tools.search.jvm import lucene_available
    backends = args.backends or (["lucene", "bm25"] if lucene_available() else ["bm25"])
    tasks, golds = questions_and_golds()
    report: dict = {
        "cpu_count": os.cpu_count(), "threads": args.threads, "loadavg_before": os.getloadavg(),
        "questions": len(tasks), "planted_golds": len(golds), "k": K, "sizes": {}}
    model = None if args.corpus else fit_text_model()
    if args.corpus:
        report["corpus"] = {"source": str(args.corpus), "sample": "uniform, nested, seed 0"}
    else:
        report["text_model"] = {k: (round(v, 4) if isinstance(v, float) else v)
                                for k, v in model.items() if k != "ranked"}
        report["words_per_passage"] = WORDS_PER_PASSAGE
    queries = [t.question for t in tasks]
    with tempfile.TemporaryDirectory(prefix="tir-search-scale-") as tmp:
        samples: dict[int, Path] = {}
        if args.corpus:
            t = time.perf_counter()
            wanted = set(args.sizes) | ({args.dense_size} if args.dense_size else set())
            samples = sample_corpus(args.corpus, sorted(wanted), golds, Path(tmp))
            report["corpus"]["sample_s"] = round(time.perf_counter() - t, 2)
        for size in args.sizes:
            entry = {}
            corpus = samples.get(size)
            if corpus is None:
                corpus, t = Path(tmp) / f"corpus-{size}.jsonl", time.perf_counter()
                write_corpus(corpus, size, model, golds)
                entry["generate_s"] = round(time.perf_counter() - t, 2)
            entry.update(corpus_mb=round(corpus.stat().st_size / 2**20, 1),
                         text_stats=text_stats(corpus, size, queries))
            for backend in backends:
                entry[backend] = run_child(backend, corpus, Path(tmp) / f"{backend}-{size}",
                                           args.threads)
                entry[backend]["loadavg"] = round(os.getloadavg()[0], 2)
            report["sizes"][size] = entry
            if not (args.corpus and size == args.dense_size):  # the dense run reads it below
                corpus.unlink()
        largest = Path(tmp) / f"lucene-{max(args.sizes)}"
        if "lucene" in backends and largest.is_dir() and args.clients:
            report["server_load_passages"] = max(args.sizes)
            report["server_load"] = [server_load(largest, queries, c,
                                                 max(5, pick(1280, 40) // c), args.threads,
                                                 batching, workers)
                                     for c in args.clients
                                     for batching, workers in ((False, 1), (True, 1), (False, 2))]
            print_server_load(report["server_load"], max(args.sizes))
        if args.dense_size:
            corpus = samples.get(args.dense_size)  # the same sample as the sparse run's
            if corpus is None:
                corpus = Path(tmp) / f"dense-corpus-{args.dense_size}.jsonl"
                write_corpus(corpus, args.dense_size, model, golds)
            report["dense"] = run_dense_child(corpus, Path(tmp) / "dense", args.dense_model)
            report["dense"]["loadavg"] = round(os.getloadavg()[0], 2)
    sizes = sorted(report["sizes"])
    if len(sizes) >= 2:
        report["model"] = "figure(N) = figure(largest measured) * growth_per_10x ** log10(N / " \
                          "largest measured N); growth fitted between the two largest sizes"
        for backend in backends:
            small, large = report["sizes"][sizes[-2]][backend], report["sizes"][sizes[-1]][backend]
            if "error" not in small and "error" not in large:
                report[f"{backend}_scaling"] = project(small, large, sizes[-2], sizes[-1])
    report["loadavg_after"] = os.getloadavg()
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
