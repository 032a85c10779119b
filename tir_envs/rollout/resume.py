"""Resuming ``tir-envs rollout``: what an interrupted run saved, and whether a rerun may go on.

Beside ``--out`` the command keeps ``OUT.run.json``: the settings that decide which episodes
exist and what they hold (env, policy, tasks, samples, sampling, seed, env arguments).  A rerun
of the same command on the same ``--out`` reads the trajectories already there (their
``group``/``sample`` tags), skips them and appends the rest, each with the seed it would have
had; a rerun with other settings is refused, naming them.  A last line cut off by the
interruption is dropped before appending.  An ``--out`` file without its ``.run.json`` was not
written by this command and is never appended to.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

#: the flags whose values decide the episodes a run makes
SETTINGS = ("env", "policy", "tasks", "limit", "samples", "max_tokens", "temperature", "top_p",
            "top_k", "seed", "env_arg", "tokenizer", "model", "imports")


def settings_path(out: str | Path) -> Path:
    return Path(f"{out}.run.json")


def settings_of(args: argparse.Namespace) -> dict[str, Any]:
    return {key: getattr(args, key, None) for key in SETTINGS}


def check_resume(args: argparse.Namespace) -> bool:
    """Whether ``--out`` holds an earlier run of this same command to resume (``SystemExit``
    when it exists but cannot be resumed)."""
    out, meta = Path(args.out), settings_path(args.out)
    if args.overwrite:
        return False
    if not out.exists():
        return False
    if not meta.is_file():
        raise SystemExit(f"--out {args.out!r} already exists; pass --overwrite to replace it, "
                         "or choose another file (it cannot be resumed: no "
                         f"{meta.name} beside it says which run wrote it)")
    before = json.loads(meta.read_text(encoding="utf-8"))
    now = json.loads(json.dumps(settings_of(args)))
    differ = sorted(k for k in SETTINGS if before.get(k) != now.get(k))
    if differ:
        changes = "; ".join(f"{k}: {before.get(k)!r} then, {now.get(k)!r} now" for k in differ)
        raise SystemExit(f"--out {args.out!r} holds a run with other settings ({changes}); "
                         "rerun with the same ones to resume, or pass --overwrite")
    return True


def start(args: argparse.Namespace, resuming: bool) -> set[tuple[int, int]]:
    """Write the settings file (a new run) or read the finished episodes (a resumed one),
    dropping a last line cut short; the ``(group, sample)`` pairs already saved."""
    if not resuming:
        Path(args.out).write_text("", encoding="utf-8")
        settings_path(args.out).write_text(json.dumps(settings_of(args), indent=1) + "\n",
                                           encoding="utf-8")
        return set()
    return finished(Path(args.out), repair=True)


def finished(out: Path, repair: bool = False) -> set[tuple[int, int]]:
    """``(group, sample)`` of every complete trajectory line of ``out``; ``repair``: cut the
    file after its last complete line."""
    done: set[tuple[int, int]] = set()
    good = 0
    with open(out, "rb") as f:
        for line in f:
            try:
                meta = json.loads(line).get("metadata", {})
            except ValueError:
                break  # a line cut by the interruption: it and anything after are dropped
            if not line.endswith(b"\n"):
                break
            done.add((int(meta["group"]), int(meta["sample"])))
            good += len(line)
    if repair:
        with open(out, "r+b") as f:
            f.truncate(good)
    return done


def saved_count(out: str | Path) -> int:
    """Complete trajectories in ``out``."""
    return len(finished(Path(out))) if Path(out).exists() else 0


def discard_if_empty(out: str | Path) -> None:
    """Remove ``out`` and its settings when no episode was saved (a run that failed to start)."""
    if Path(out).exists() and Path(out).stat().st_size == 0:
        Path(out).unlink()
        settings_path(out).unlink(missing_ok=True)
