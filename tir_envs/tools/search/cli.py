"""``tir-envs index``: build a search index, write the HotpotQA corpus, query an index.

    tir-envs index build --corpus corpus.jsonl --out idx/ [--backend lucene|bm25|dense]
    tir-envs index build --corpus c.jsonl --out idx/ --backend dense --model e5/ \
        --faiss-index IVF4096,PQ64 --device cuda
    tir-envs index import-faiss --faiss e5_Flat.index --corpus wiki-18.jsonl --model e5/ \
        --out wiki18-e5/
    tir-envs index convert --from wiki18-e5/ --out wiki18-ivfpq/ --faiss-index IVF65536,PQ64np
    tir-envs index corpus --out hotpotqa.jsonl
    tir-envs index search --index idx/ "who wrote Hamlet" [-k 3]
"""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("index", help="build and query search indexes")
    sub = parser.add_subparsers(dest="index_command", metavar="ACTION", required=True)

    build = sub.add_parser("build", help="index a corpus: JSONL ('id' + 'contents', or "
                                         "'title' + 'text', per line; .gz too) or Parquet")
    build.add_argument("--corpus", required=True,
                       help="JSONL corpus; 'hotpotqa' for the shipped HotpotQA paragraphs")
    build.add_argument("--out", required=True, help="index folder to create")
    build.add_argument("--backend", default="auto", choices=["auto", "lucene", "bm25", "dense"],
                       help="auto: lucene if Java 21 is available, else bm25 (default)")
    build.add_argument("--threads", type=int, default=1, help="indexing threads (lucene)")
    build.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    build.add_argument("--skip-bad", action="store_true",
                       help="skip (and count) bad records instead of stopping at the first")
    build.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    build.add_argument("--memory-mb", type=int, help="lucene: Java heap cap (-Xmx) in MiB")
    build.add_argument("--model", help="dense: local sentence-embedding model folder")
    build.add_argument("--pooling", choices=["mean", "cls"], help="dense: pooling (default: "
                       "the model folder's sentence-transformers setting, else mean)")
    build.add_argument("--query-prefix", default="", help="dense: e.g. 'query: ' for e5")
    build.add_argument("--passage-prefix", default="", help="dense: e.g. 'passage: ' for e5")
    build.add_argument("--device", default="cpu", help="dense: torch device")
    build.add_argument("--batch-size", type=int, default=64, help="dense: passages per "
                       "encoder forward pass")
    build.add_argument("--faiss-index", default="Flat",
                       help="dense: faiss factory string: Flat (exact, default), IVF4096,Flat, "
                            "HNSW32, PQ64, IVF4096,PQ64 ...")
    build.add_argument("--train-size", type=int, help="dense IVF/PQ: passages sampled to train "
                       "the index (default 40 per centroid, at least 10,000)")
    build.add_argument("--nprobe", type=int, help="dense IVF: lists searched per query "
                       "(stored as the index's default)")
    build.add_argument("--ef-search", type=int, help="dense HNSW: candidates per query "
                       "(stored as the index's default)")
    build.set_defaults(func=_build)

    imp = sub.add_parser("import-faiss", help="use a faiss index built elsewhere (FlashRAG's / "
                                              "Search-R1's e5_Flat.index) with its JSONL corpus")
    imp.add_argument("--faiss", required=True, help="the faiss index file")
    imp.add_argument("--corpus", required=True, help="its JSONL corpus (row i = line i)")
    imp.add_argument("--model", required=True, help="local folder of the encoder that built it")
    imp.add_argument("--out", required=True, help="index folder to create (names the files)")
    imp.add_argument("--pooling", default="mean", choices=["mean", "cls"],
                     help="the encoder's pooling (e5: mean, the default)")
    imp.add_argument("--query-prefix", default="query: ", help="default 'query: ' (e5)")
    imp.add_argument("--passage-prefix", default="passage: ", help="default 'passage: ' (e5)")
    imp.add_argument("--max-length", type=int, default=256, help="query tokens (default 256)")
    imp.add_argument("--faiss-index", default="Flat", help="what the file is (default Flat)")
    imp.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    imp.set_defaults(func=_import_faiss)

    conv = sub.add_parser("convert", help="a dense index's vectors as another faiss index "
                                          "(e.g. Flat into IVF,PQ), without encoding again")
    conv.add_argument("--from", dest="source", required=True, help="a dense Flat index folder")
    conv.add_argument("--out", required=True, help="index folder to create")
    conv.add_argument("--faiss-index", required=True, help="faiss factory string, e.g. "
                      "IVF65536,PQ64np or HNSW32")
    conv.add_argument("--train-size", type=int, help="vectors sampled to train IVF/PQ")
    conv.add_argument("--nprobe", type=int, help="IVF: lists searched per query (default)")
    conv.add_argument("--ef-search", type=int, help="HNSW: candidates per query (default)")
    conv.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    conv.set_defaults(func=_convert)

    corpus = sub.add_parser("corpus", help="write the shipped HotpotQA paragraph corpus")
    corpus.add_argument("--out", required=True, help="JSONL file to write")
    corpus.set_defaults(func=_corpus)

    search = sub.add_parser("search", help="query an index (or a retrieval server URL)")
    search.add_argument("--index", required=True, help="index folder or http://host:port")
    search.add_argument("query", nargs="+", help="query text")
    search.add_argument("-k", type=int, default=3, help="documents to return")
    search.add_argument("--json", action="store_true", help="print hits as JSON")
    search.set_defaults(func=_search)


def _build(args: argparse.Namespace) -> int:
    from tir_envs.tools.search.backends import auto_backend, build_index
    from tir_envs.tools.search.corpus import read_manifest

    corpus = args.corpus
    if corpus == "hotpotqa":
        from tir_envs.tools.search.hotpotqa import hotpotqa_corpus
        corpus = hotpotqa_corpus()
    backend = auto_backend() if args.backend == "auto" else args.backend
    options: dict = {"skip_bad": args.skip_bad, "progress": not args.no_progress}
    if backend == "lucene":
        options.update(threads=args.threads, memory_mb=args.memory_mb)
    elif backend == "dense":
        options |= {"model": args.model, "pooling": args.pooling, "device": args.device,
                    "query_prefix": args.query_prefix, "passage_prefix": args.passage_prefix,
                    "batch_size": args.batch_size, "faiss_index": args.faiss_index,
                    "train_size": args.train_size, "nprobe": args.nprobe,
                    "ef_search": args.ef_search}
    out = build_index(corpus, args.out, backend=backend, overwrite=args.overwrite, **options)
    manifest = read_manifest(out) or {}
    if not args.no_progress:
        print(f"built {out}: {manifest.get('num_docs')} documents, "
              f"{manifest.get('skipped', 0)} skipped, {manifest.get('build_seconds')} s, "
              f"peak RSS {manifest.get('peak_rss_mb')} MiB (indexer process "
              f"{manifest.get('peak_rss_children_mb', 0)} MiB)", file=sys.stderr)
    print(json.dumps({"index": str(out), **manifest}))
    return 0


def _import_faiss(args: argparse.Namespace) -> int:
    from tir_envs.tools.search.corpus import read_manifest
    from tir_envs.tools.search.dense import import_faiss_index

    out = import_faiss_index(args.faiss, args.corpus, args.out, args.model,
                             pooling=args.pooling, query_prefix=args.query_prefix,
                             passage_prefix=args.passage_prefix, max_length=args.max_length,
                             faiss_index=args.faiss_index, overwrite=args.overwrite)
    print(json.dumps({"index": str(out), **(read_manifest(out) or {})}))
    return 0


def _convert(args: argparse.Namespace) -> int:
    from tir_envs.tools.search.corpus import read_manifest
    from tir_envs.tools.search.dense import convert_dense_index

    out = convert_dense_index(args.source, args.out, args.faiss_index,
                              train_size=args.train_size, nprobe=args.nprobe,
                              ef_search=args.ef_search, overwrite=args.overwrite)
    print(json.dumps({"index": str(out), **(read_manifest(out) or {})}))
    return 0


def _corpus(args: argparse.Namespace) -> int:
    from tir_envs.tools.search.hotpotqa import write_hotpotqa_corpus

    print(write_hotpotqa_corpus(args.out))
    return 0


def _search(args: argparse.Namespace) -> int:
    from tir_envs.tools.search.backends import open_retriever
    from tir_envs.tools.search.formatting import format_hits

    with open_retriever(args.index) as retriever:
        hits = retriever.search(" ".join(args.query), args.k)
    if args.json:
        print(json.dumps([h.to_dict() for h in hits], ensure_ascii=False))
    else:
        sys.stdout.write(format_hits(hits))
    return 0
