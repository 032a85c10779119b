"""The ``tir-envs`` command.  Each subcommand lives in its own module with ``add_parser``.

Subcommand modules import heavy dependencies inside their handlers, so ``tir-envs --help``
stays fast and works with only the core install.

Errors are one line on stderr, never a traceback: a bad argument (argparse's, or a
``SystemExit("--flag ...: what is wrong")`` from a handler) exits 2, any other error 1.
``--traceback`` shows the full traceback instead, for bug reports.
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
    "bench": "benchmarks.cli",
}


class OneLineParser(argparse.ArgumentParser):
    """argparse, with usage errors on one line (the usage itself is one ``--help`` away)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="tir-envs",
        description="Environments, tools and rollouts for tool-integrated reasoning.")
    parser.add_argument("--traceback", action="store_true",
                        help="on an error, show the full traceback (for bug reports)")
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
    prog = f"{parser.prog} {args.command}"
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what a resume hint repeats
    try:
        return int(args.func(args) or 0)
    except SystemExit as exc:
        if args.traceback or not isinstance(exc.code, str):
            raise
        print(f"{prog}: error: {exc.code}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - one line for the user; --traceback for the rest
        if args.traceback:
            raise
        message = " ".join(str(exc).split()) or "(no message)"
        print(f"{prog}: error: {type(exc).__name__}: {message} (--traceback for details)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
