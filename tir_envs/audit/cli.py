"""``tir-envs audit``: probe an env for reward hacks (``docs/audit.md``).

    tir-envs audit tir/MathCode-v0 --protocol zerotir --tasks 3 --out audit/
    tir-envs audit tir/SQL-v0 --env-arg tool_timeout_s=2 --out audit/
    tir-envs audit demo/Counter-v0 --import my_envs.counter --out audit/
    tir-envs audit tir/OpenEnv-v0 --env-arg url=http://127.0.0.1:8000    # a remote env
    tir-envs audit tir/SQL-v0 --via openenv                              # over the wire

Writes ``audit.json`` and ``audit.md`` into ``--out`` and prints the Markdown.  Exit status 0
when every probe HELD, 1 when any PAYS (earns more than an honest wrong answer), MASKS (an
episode the trainer would drop as the env's fault) or FORGES (text became control tokens).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tir_envs.rollout.cli import (add_import_flag, parse_env_args, positive_float,
                                  positive_int)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("audit", help="probe an env for reward hacks",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("env", metavar="ENV_ID", help="a registered env id, e.g. tir/MathCode-v0")
    p.add_argument("--protocol", help="the env's protocol argument (tir/MathCode-v0: torl, "
                                      "zerotir, rite)")
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="env constructor argument (VALUE parsed as JSON when it can be)")
    p.add_argument("--tasks", type=positive_int, default=3,
                   help="tasks each probe plays (spread over the env's tasks with a gold)")
    p.add_argument("--out", help="folder for audit.json and audit.md")
    p.add_argument("--probe", action="append", default=[], metavar="NAME",
                   help="run only these probes (a name, or a family such as 'hedge')")
    p.add_argument("--timeout", type=positive_float, default=120.0,
                   help="seconds per episode before it counts as masked")
    p.add_argument("--via", metavar="openenv|URL",
                   help="play every episode over OpenEnv's WebSocket: 'openenv' serves the env "
                        "here, a URL names a running 'tir-envs serve openenv' of the same env")
    add_import_flag(p)
    p.set_defaults(func=run)
    return p


def select(names: list[str]):
    """The probes named (or of the families named); all when ``names`` is empty."""
    from tir_envs.audit.battery import PROBES
    if not names:
        return list(PROBES)
    known = {p.name for p in PROBES} | {p.family for p in PROBES}
    unknown = sorted(set(names) - known)
    if unknown:
        raise SystemExit(f"--probe {', '.join(unknown)}: unknown; probes and families: "
                         f"{', '.join(sorted(known))}")
    return [p for p in PROBES if p.name in names or p.family in names]


def run(args: argparse.Namespace) -> int:
    if args.out:
        try:
            Path(args.out).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SystemExit(f"--out {args.out!r}: cannot create the folder ({exc})") from None
    from tir_envs.registry import import_modules
    import_modules(args.imports)
    env_kwargs = parse_env_args(args.env_arg)
    probes = select(args.probe)
    from tir_envs.audit.session import audit
    report = audit(args.env, protocol=args.protocol, env_kwargs=env_kwargs, tasks=args.tasks,
                   probes=probes, episode_timeout_s=args.timeout, out=args.out,
                   via=args.via)
    sys.stdout.write(report.to_markdown())
    return 0 if report.ok else 1
