"""The ``tir-envs`` command.  Each subcommand lives in its own module with ``add_parser``.

Subcommand modules import heavy dependencies inside their handlers, so ``tir-envs --help``
stays fast and works with only the core install.  ``bench`` comes from the top-level
``benchmarks`` package, which ships in the same distribution (pyproject's ``packages.find``):
this module is the one place the library reaches up to it, as the command that assembles
every part.

Errors are one line on stderr, never a traceback: a bad argument (argparse's, or a
``SystemExit("--flag ...: what is wrong")`` from a handler) exits 2, any other error 1.
``--traceback`` shows the full traceback instead, for bug reports.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import ModuleType

from tir_envs.bench import cli as bench_cli
from tir_envs import demo
from tir_envs.audit import cli as audit_cli
from tir_envs.chat import check as chat_check
from tir_envs.rollout import cli as rollout_cli
from tir_envs.serving import cli as serve_cli
from tir_envs.tools.search import cli as index_cli
from tir_envs.viewer import cli as view_cli



def check_own_package(module: ModuleType) -> ModuleType:
    """``module`` (``tir_envs.bench.cli``) must come from this distribution, next to ``tir_envs``.

    ``benchmarks`` and ``trainers`` are top-level packages (the project's fixed layout,
    docs/benchmarks.md says why); another installed distribution with a package of the same
    name, earlier on ``sys.path``, would shadow ours.  Said here, by name, instead of an
    ``AttributeError`` deep in argparse."""
    ours = Path(__file__).resolve().parents[1]
    found = Path(module.__file__ or "").resolve()
    if ours not in found.parents:
        top = module.__name__.split(".")[0]
        raise ImportError(f"the {top!r} package imported from {found.parent} is not tir-envs' "
                          f"own (expected under {ours}): another installed package named "
                          f"{top!r} shadows it. Uninstall that package, or put tir-envs first on "
                          "sys.path (a fresh virtual environment does).")
    return module


check_own_package(bench_cli)

# subcommand -> module exposing add_parser(subparsers)
SUBCOMMANDS: dict[str, ModuleType] = {
    "demo": demo,
    "index": index_cli,
    "serve": serve_cli,
    "rollout": rollout_cli,
    "bench": bench_cli,
    "audit": audit_cli,
    "view": view_cli,
    "chat-check": chat_check,
}


class OneLineParser(argparse.ArgumentParser):
    """argparse, with usage errors on one line (the usage itself is one ``--help`` away)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or (``command``) only that subcommand's part: a run of one
    command does not pay for building every other's arguments (``tir-envs bench list``)."""
    parser = OneLineParser(
        prog="tir-envs",
        description="Environments, tools and rollouts for tool-integrated reasoning.")
    parser.add_argument("--traceback", action="store_true",
                        help="on an error, show the full traceback (for bug reports)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in SUBCOMMANDS.items():
        if command in (None, name):
            module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
    parser = build_parser(words[0] if words and words[0] in SUBCOMMANDS else None)
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
