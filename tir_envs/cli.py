"""The ``tir-envs`` command.  Each subcommand lives in its own module with ``add_parser``.

Subcommand modules import heavy dependencies inside their handlers, so ``tir-envs --help``
stays fast and works with only the core install.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# subcommand -> module exposing add_parser(subparsers)
SUBCOMMANDS = {
    "demo": "tir_envs.demo",
    "index": "tir_envs.tools.search.cli",
    "serve": "tir_envs.tools.search.serve_cli",
    "rollout": "tir_envs.rollout.cli",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tir-envs", description="Environments, tools and rollouts for tool-integrated reasoning.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in SUBCOMMANDS.items():
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:  # the subcommand is not part of this build
                continue
            raise
        mod.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
