"""``tir-envs view RUN_DIR|traj.jsonl [--out page.html] [--serve]``."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("view", help="a self-contained HTML page of a run's trajectories",
                       description="Write one HTML page (no network needed to open it) showing "
                       "a benchmark run folder, a samples.jsonl, a trajectory JSONL or a folder "
                       "of GRPO rollout dumps: a filterable run table and every trajectory "
                       "token by token (policy vs env tokens as the loss mask says, logprobs).")
    p.add_argument("source", help="run folder, samples.jsonl, trajectory JSONL or a folder of "
                   "*.jsonl trajectory files")
    p.add_argument("--out", help="where to write the page (default: view.html in a run folder, "
                   "else SOURCE with .html)")
    p.add_argument("--tokenizer", help="tokenizer the ids belong to: a folder, hub name, "
                   "family:NAME or module:function (default: the run's setting, else the one "
                   "the ledgers pin, else the bundled Qwen2.5, flagged as a guess)")
    p.add_argument("--serve", action="store_true", help="also serve the page on localhost")
    p.add_argument("--port", type=int, default=0, help="port for --serve (default: any free)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tir_envs.viewer import ViewSourceError, write_page

    try:
        page = write_page(args.source, args.out, args.tokenizer)
    except ViewSourceError as exc:
        raise SystemExit(str(exc)) from None
    print(f"wrote {page} ({page.stat().st_size // 1024} KiB): open it in a browser")
    if args.serve:
        serve(page, args.port)
    return 0


def serve(page: Path, port: int = 0) -> None:
    """Serve the page's folder on 127.0.0.1 until Ctrl-C (the page itself needs no server)."""
    import functools
    import http.server

    handler = functools.partial(http.server.SimpleHTTPRequestHandler,
                                directory=str(page.parent.resolve()))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as httpd:
        print(f"serving http://127.0.0.1:{httpd.server_address[1]}/{page.name} (Ctrl-C stops)",
              flush=True)
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            print("stopped")
