"""Function tools a policy can turn against the host (importable by name, for
``isolation="process"`` and for the audit's hostile-argument probes)."""

from __future__ import annotations

import argparse
import asyncio
import time


def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: the first factor.
        b: the second factor.
    """
    return a * b


def power(base: int, exponent: int) -> int:
    """base ** exponent."""
    return base ** exponent


def cli(args: str) -> str:
    """Run a tiny argparse command line (a bad argument makes argparse exit)."""
    parser = argparse.ArgumentParser(prog="cli")
    parser.add_argument("--n", type=int, required=True)
    return str(parser.parse_args(args.split()).n * 2)


def nest(depth: int) -> list:
    """A list nested ``depth`` deep."""
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def hang(x: int) -> int:
    """Never answers (sleeps far past any deadline)."""
    time.sleep(3600)
    return x


def instant(x: int) -> int:
    """Answers at once."""
    return x


async def cancels(x: int) -> int:
    """Lets a CancelledError of its own making out."""
    raise asyncio.CancelledError()


def own_timeout(x: int) -> int:
    """Raises its own TimeoutError at once."""
    raise TimeoutError("the tool's own deadline")


def interrupts(x: int) -> int:
    """Raises KeyboardInterrupt itself."""
    raise KeyboardInterrupt


def exits(code: int) -> int:
    """Calls sys.exit."""
    raise SystemExit(code)


def worker_limits(x: int) -> str:
    """The calling process's niceness and CPU-time soft limit, as ``"nice cpu_soft"``."""
    import os
    import resource
    return f"{os.nice(0)} {resource.getrlimit(resource.RLIMIT_CPU)[0]}"
