"""The one command line every adapter's dataset writer shares: which env, which tasks, which
tokenizer, label form, where to write.  Each adapter passes its own writer (OpenRLHF: JSONL,
verl: Parquet, TRL: JSONL with the label as the prompt)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from trainers.common.env_config import ConfigError, EnvConfig

Writer = Callable[[EnvConfig, "str | Path", Any, bool, "int | None"], int]


def dataset_main(argv: Sequence[str] | None, prog: str, description: str, out_help: str,
                 write: Writer) -> int:
    """Parse the writer's arguments, check them, write; returns the exit status."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--env", required=True, help="env id, e.g. tir/MathCode-v0")
    parser.add_argument("--tasks", help="task set: a shipped dataset name or a JSONL path "
                                        "(default: the env's own)")
    parser.add_argument("--env-kwargs", default="{}",
                        help="JSON object of further env arguments, e.g. '{\"protocol\": \"rite\"}'")
    parser.add_argument("--tokenizer", help="the policy's tokenizer (a local folder); its chat "
                                            "template renders the prompts (default: bundled Qwen2.5)")
    parser.add_argument("--inline", action="store_true",
                        help="labels carry whole tasks instead of task ids")
    parser.add_argument("--limit", type=int, help="only the first N tasks")
    parser.add_argument("--out", required=True, help=out_help)
    args = parser.parse_args(argv)
    try:
        kwargs = json.loads(args.env_kwargs)
        if not isinstance(kwargs, dict):
            raise ConfigError("--env-kwargs must be a JSON object")
        if args.tasks:
            kwargs["tasks"] = args.tasks
        config = EnvConfig(args.env, kwargs)
    except (json.JSONDecodeError, ConfigError) as exc:
        parser.error(str(exc))
    n = write(config, args.out, args.tokenizer, args.inline, args.limit)
    print(f"wrote {n} records to {args.out}", file=sys.stderr)
    return 0
