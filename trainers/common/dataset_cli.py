"""The one command line every adapter's dataset writer shares: which env, which tasks, which
tokenizer, label form, where to write.  Each adapter passes its own writer (OpenRLHF: JSONL,
verl: Parquet, TRL: JSONL with the label as the prompt).

``--env-config`` reads the env from the trainer's own file (a verl agent-loop file, or a
``TIR_ENV_CONFIG`` file): the rows are written from the env the trainer will run, so an id label
cannot name a task that env lacks.  A ``--tasks`` that differs from that file's task set is
refused for id labels (only ``--inline`` rows, which carry whole tasks, may come from elsewhere,
e.g. a validation set)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from tir_envs.trainers.common.env_config import ConfigError, EnvConfig
from tir_envs.trainers.common.labels import LabelError

Writer = Callable[[EnvConfig, "str | Path", Any, bool, "int | None"], int]


def dataset_main(argv: Sequence[str] | None, prog: str, description: str, out_help: str,
                 write: Writer) -> int:
    """Parse the writer's arguments, check them, write; returns the exit status."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--env", help="env id, e.g. tir/MathCode-v0")
    parser.add_argument("--env-config", help="the trainer's env file instead of --env/--env-kwargs:"
                                             " a verl agent-loop YAML or a TIR_ENV_CONFIG YAML")
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
        config = _config(args)
    except (json.JSONDecodeError, ConfigError) as exc:
        parser.error(str(exc))
    try:
        n = write(config, args.out, args.tokenizer, args.inline, args.limit)
    except LabelError as exc:  # a row the trainer's env could not find: refused, nothing written
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {n} records to {args.out}", file=sys.stderr)
    return 0


def _config(args: argparse.Namespace) -> EnvConfig:
    """The env to write rows from: ``--env`` (+ kwargs, tasks) or the trainer's ``--env-config``."""
    if bool(args.env) == bool(args.env_config):
        raise ConfigError("give the env either with --env (and --env-kwargs) or with "
                          "--env-config (the trainer's own env file), exactly one")
    if args.env:
        kwargs = json.loads(args.env_kwargs)
        if not isinstance(kwargs, dict):
            raise ConfigError("--env-kwargs must be a JSON object")
        if args.tasks:
            kwargs["tasks"] = args.tasks
        return EnvConfig(args.env, kwargs)
    if args.env_kwargs.strip() not in ("", "{}"):
        raise ConfigError(f"--env-kwargs with --env-config: edit {args.env_config} instead, so "
                          "the trainer runs the env the rows were written from")
    config = EnvConfig.from_file(args.env_config)
    if not args.tasks:
        return config
    theirs = config.env_kwargs.get("tasks")
    if not args.inline and args.tasks != theirs:
        raise ConfigError(
            f"--tasks {args.tasks!r} with id labels: the trainer's env ({args.env_config}) holds "
            f"tasks={theirs!r}, so these ids would name tasks it does not have; drop --tasks "
            "(write the file's own task set), set tasks in the file, or use --inline (rows carry "
            "whole tasks, e.g. a validation set)")
    return EnvConfig(config.env_id, {**config.env_kwargs, "tasks": args.tasks})
