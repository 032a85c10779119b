"""``tir-envs bench``: evaluate a policy on benchmark suites; compare and report runs.

    tir-envs bench --suite math500 --policy vllm:/models/x -k 8 --temperature 0.6 \\
        --top-p 0.95 --seed 0 --out runs/x
    tir-envs bench --suite hotpotqa --suite bamboogle --policy openai:http://127.0.0.1:8000/v1 \\
        --model qwen --no-tools --out runs/x-notools
    tir-envs bench --suite math500 --policy oracle --out runs/sanity   # must score 100%
    tir-envs bench --tasks mine.jsonl --protocol rite --policy hf:/models/x --out runs/mine
    tir-envs bench --suite math500 --policy openai:http://a:8000/v1,http://b:8000/v1 \
        --model qwen -k 16 --seeds 3 --ray auto --out runs/x-ray
    tir-envs bench compare runs/x runs/y      # side by side by (suite, part), paired test
    tir-envs bench report runs/x --by level   # rebuild summary.json, report.md, plots
    tir-envs bench list                       # the suites, their envs and item counts
    tir-envs bench --preset torl --policy vllm:/models/x --out runs/x-torl   # ToRL's own table

Policy specs are those of ``tir-envs rollout`` (hf:PATH, vllm:PATH, openai:URL[,URL...],
scripted:FILE), plus ``oracle`` and ``wrong``.  Rerunning the same command on the same --out
resumes: finished samples are not run again; a second process on the same --out is refused.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import TYPE_CHECKING, Any

from tir_envs.rollout.cli import add_import_flag

if TYPE_CHECKING:
    from tir_envs.bench.config import RunConfig


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("bench", help="run benchmark suites against a policy; compare runs",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", action="append", default=[],
                   help="suite name (repeat, or comma-separate, for several); see `bench list`")
    p.add_argument("--tasks", metavar="FILE",
                   help="your own tasks (.jsonl/.parquet), run as the suite custom:FILE and "
                        "pinned by its sha256")
    p.add_argument("--env", help="env of --tasks / custom:FILE (default tir/MathCode-v0; pick "
                                 "the protocol with --protocol)")
    p.add_argument("--scoring", choices=["math", "qa", "sql", "choice", "ifeval"],
                   help="how --tasks answers are compared (default: the env's)")
    p.add_argument("--policy", help="hf:PATH | vllm:PATH | openai:URL | scripted:FILE | oracle "
                                    "(each item's gold: must score 100%%) | wrong (a fixed "
                                    "wrong answer: must score 0 where there is a gold answer; "
                                    "IFEval, which has none, scores above 0 by design)")
    p.add_argument("--out", help="run folder (resumed if it exists)")
    p.add_argument("--preset", choices=["torl", "zerotir", "verltool", "autotir", "rite"],
                   help="run a seed paper's own table: its suites, k, sampling, protocol and "
                        "call budget (docs/papers.md); the report states it")
    p.add_argument("-k", type=int, help="samples per item (default 1)")
    p.add_argument("--seeds", type=int, default=1,
                   help="independent replicates of the k samples, each with its own seeds; the "
                        "report gives the spread over them (default 1)")
    p.add_argument("--by", action="append", default=[], metavar="FIELD",
                   help="break each part's accuracy down by this task field (repeatable; "
                        "MATH-500 is always broken down by level and subject)")
    p.add_argument("--temperature", type=float,
                   help="default: 0 (greedy) for k = 1, 0.6 for k > 1 (pass@k)")
    p.add_argument("--top-p", type=float, help="default: 1 when greedy, else 0.95")
    p.add_argument("--top-k", type=int, default=-1)
    p.add_argument("--seed", type=int, default=0, help="sampling seed; sample s of item i gets "
                                                       "seed + i*k + s (default 0)")
    p.add_argument("--max-tokens", type=int, help="cap per turn (default: the env's own "
                                                  "budget, the protocol's length limit)")
    p.add_argument("--protocol", help="math suites: torl (default), zerotir or rite")
    p.add_argument("--no-tools", action="store_true",
                   help="the protocols' standalone prompt, no tool executed (w/o tools column)")
    p.add_argument("--limit", type=int, help="only the first N items of each part (smoke runs)")
    p.add_argument("--model", help="served model name (openai policy)")
    p.add_argument("--api-key", help="bearer token for the openai policy")
    p.add_argument("--tokenizer", help="tokenizer folder shared by env and policy")
    p.add_argument("--concurrency", type=int, default=32, help="episodes in flight")
    p.add_argument("--timeout", type=float, help="seconds per episode before it is flagged")
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="extra env constructor argument (VALUE parsed as JSON when it can be)")
    p.add_argument("--tensor-parallel-size", type=int, help="vllm: GPUs per model replica")
    p.add_argument("--max-model-len", type=int, help="vllm: context length the engine serves")
    p.add_argument("--gpu-memory-utilization", type=float,
                   help="vllm: share of GPU memory the engine may take (0-1)")
    p.add_argument("--engine-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="vllm: any other AsyncEngineArgs field (VALUE parsed as JSON when it "
                        "can be)")
    p.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                   help="run the episodes on a Ray cluster's workers (ADDRESS: auto, "
                        "ray://host:10001; none: a local instance); the run folder stays here")
    p.add_argument("--as-served", action="store_true",
                   help="chat envs: give the model each turn's conversation re-rendered by its "
                        "family's chat template, as a server would (earlier reasoning dropped "
                        "where the template drops it), and report the drift from the ledger")
    p.add_argument("--agent", metavar="MODULE:FN",
                   help="benchmark an agent program: async def FN(task, base_url, api_key), run "
                        "through the gateway over --policy for every sample (docs/gateway.md)")
    p.add_argument("--judge", metavar="SPEC",
                   help="the LLM judge of judged suites (hotpotqa-judged, autotir-judged): "
                        "hf:PATH | vllm:PATH | openai:URL (with --judge-model); never the policy")
    p.add_argument("--judge-model", help="the judge's model name on an OpenAI-compatible server")
    p.add_argument("--judge-tokenizer", help="the judge's tokenizer (default: its spec's)")
    p.add_argument("--judge-renderer", help="the judge family's chat renderer (default: detected)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_import_flag(p)
    p.set_defaults(func=run_command)
    sub = p.add_subparsers(dest="bench_command", metavar="{compare,report,list}")
    c = sub.add_parser("compare", help="two run folders side by side, with a paired test")
    c.add_argument("run_a")
    c.add_argument("run_b")
    c.add_argument("--alpha", type=float, default=0.05, help="significance level (0.05)")
    c.set_defaults(func=compare_command)
    r = sub.add_parser("report", help="rebuild summary.json, report.md and plots of a run")
    r.add_argument("run")
    r.add_argument("--by", action="append", default=[], metavar="FIELD",
                   help="also break each part down by this task field")
    r.set_defaults(func=report_command)
    ls = sub.add_parser("list", help="the suites")
    ls.set_defaults(func=list_command)
    return p


def _suites(values: list[str], tasks: str | None = None) -> list[str]:
    from tir_envs.bench.suites import SUITES, suite_name

    names = [suite_name(n.strip()) for v in values for n in v.split(",") if n.strip()]
    if not names and not tasks:
        raise SystemExit("bench: name a suite with --suite (see `tir-envs bench list`) or your "
                         "own tasks with --tasks FILE")
    unknown = [n for n in names if n not in SUITES and not n.startswith("custom:")]
    if unknown:
        raise SystemExit(f"bench: unknown suite(s) {unknown}; known: {', '.join(SUITES)}")
    return names


def run_command(args: argparse.Namespace) -> int:
    from tir_envs.bench.harness import RunInterrupted

    from tir_envs.registry import import_modules

    import_modules(args.imports)
    names = [] if args.preset else _suites(args.suite, args.tasks)
    if not args.policy or not args.out:
        raise SystemExit("bench: --policy and --out are required to run suites")
    try:
        summary = _run(names, args)
    except RunInterrupted as exc:
        command = shlex.join(["tir-envs", *getattr(args, "argv", ["bench", "..."])])
        print(f"tir-envs bench: interrupted: {exc.saved} of {exc.total} samples are saved in "
              f"{exc.folder}; resume with:\n  {command}", file=sys.stderr)
        return 130
    table = {name: round(100 * col["acc"], 2) for name, col in summary["autotir_table"].items()}
    print(json.dumps({"out": args.out, "accuracy_pct": table}))
    return 0


#: flags whose ``RunConfig`` field has another name (the others are named as their field)
FLAG_FIELDS = {"timeout": "episode_timeout_s"}


def run_config(names: list[str], args: argparse.Namespace) -> "RunConfig":
    """The ``RunConfig`` of a ``bench`` command line: every flag named as a field (or mapped in
    ``FLAG_FIELDS``) fills it; ``--no-tools``, ``--env-arg``, the vllm engine flags and
    ``--no-progress`` are read into their fields here."""
    import dataclasses

    from tir_envs.bench.config import RunConfig
    from tir_envs.rollout.cli import parse_env_args

    engine_args = parse_env_args(args.engine_arg, "--engine-arg")
    for flag in ("tensor_parallel_size", "max_model_len", "gpu_memory_utilization"):
        if getattr(args, flag) is not None:
            engine_args[flag] = getattr(args, flag)
    given = {FLAG_FIELDS.get(name, name): value for name, value in vars(args).items()}
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    settings = {name: value for name, value in given.items() if name in fields}
    settings.update(suites=tuple(names), use_tools=not args.no_tools,
                    k=1 if args.k is None else args.k,
                    env_kwargs=parse_env_args(args.env_arg), engine_args=engine_args,
                    progress=not args.no_progress)
    return RunConfig(**settings)


#: the settings a ``--preset`` leaves to the command line (it fixes the suites and sampling)
PRESET_FREE = ("top_k", "seed", "max_tokens", "use_tools", "limit", "tokenizer", "model",
               "api_key", "env_kwargs", "concurrency", "episode_timeout_s", "progress",
               "engine_args", "seeds", "by", "ray", "as_served", "agent")


def _run(names: list[str], args: argparse.Namespace) -> dict:
    from tir_envs.bench.harness import run

    config = run_config(names, args)
    if args.preset:
        return _run_preset(args, config)
    return run(config)


def _run_preset(args: argparse.Namespace, config: "RunConfig") -> dict:
    """``--preset``: the paper's suites and settings; flags that would change them refused."""
    from tir_envs.bench.harness import run_preset

    given = [flag for flag, value in (("--suite", args.suite), ("--tasks", args.tasks),
                                      ("-k", args.k), ("--temperature", args.temperature),
                                      ("--top-p", args.top_p), ("--protocol", args.protocol))
             if value is not None and value != []]
    if given:
        raise SystemExit(f"bench: --preset {args.preset} fixes {', '.join(given)}; drop them "
                         "(docs/papers.md lists each preset's settings)")
    common = {name: getattr(config, name) for name in PRESET_FREE}
    return run_preset(args.preset, args.policy, out=args.out, **common)


def compare_command(args: argparse.Namespace) -> int:
    from tir_envs.bench.compare import compare, format_result

    result = compare(args.run_a, args.run_b, args.alpha)
    print(format_result(result, args.run_a, args.run_b))
    if result["settings_differ"]:
        print("bench compare: warning: the runs differ in "
              + ", ".join(sorted(result["settings_differ"])), file=sys.stderr)
    return 0


def report_command(args: argparse.Namespace) -> int:
    from tir_envs.bench.report import REPORT, write_outputs

    write_outputs(args.run, args.by)
    print(f"{args.run}/{REPORT}")
    return 0


def list_command(args: argparse.Namespace) -> int:
    from tir_envs.bench.suites import SUITE_ALIASES, SUITES

    for suite in SUITES.values():
        parts = ", ".join(f"{p.name} ({p.count})" for p in suite.parts)
        aliases = sorted(a for a, n in SUITE_ALIASES.items() if n == suite.name)
        print(f"{suite.name:10s} {suite.env_id:18s} {suite.count:5d} items: {parts}"
              + (f" (also: {', '.join(aliases)})" if aliases else ""))
        licenses = dict.fromkeys(p.license for p in suite.parts if p.license)
        print(f"{'':10s} license: {'; '.join(licenses) or 'see SOURCES.md beside the data'}")
    return 0
