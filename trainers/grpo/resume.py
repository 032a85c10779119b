"""What may change when a run resumes: a checkpoint pins the settings it was trained with.

Resuming a finished run with ``optim.lr=1e-3`` would silently train the rest of the run under a
different recipe than the one logged, and the metrics would mix the two.  So a resumed run
must use the checkpoint's settings, except those that only extend the run or change where its
records go (``EXTENSIBLE``); anything else is refused before any work, listing each difference.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: settings a resumed run may change: how long it runs and how it is recorded, nothing it learns
EXTENSIBLE = ("train.steps", "train.save_every", "train.keep_last", "train.resume",
              "train.output_dir", "train.tensorboard", "train.wandb_project", "train.progress",
              "train.dump_rollouts")


def flatten(d: dict[str, Any], where: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` for the config's sections and their fields (values
    that are mappings, e.g. ``env.kwargs``, stay whole and compare whole)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if not where and isinstance(v, dict):
            out.update(flatten(v, f"{k}."))
        else:
            out[f"{where}{k}"] = v
    return out


def differences(saved: dict[str, Any], current: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``key -> (saved, current)`` for every setting that differs.  Values are compared in their
    JSON form (a checkpoint's ``config.json``); a key the checkpoint lacks (an option newer than
    it) is not a difference."""
    norm = lambda d: flatten(json.loads(json.dumps(d, default=str)))  # noqa: E731
    old, new = norm(saved), norm(current)
    return {k: (old[k], new[k]) for k in sorted(new) if k in old and old[k] != new[k]}


def check_resume(saved: dict[str, Any] | None, current: dict[str, Any],
                 checkpoint: str | Path) -> list[str]:
    """Raise ``ValueError`` listing the changed settings a resume may not change; return one
    ``"key: old -> new"`` line per allowed change (the caller says them)."""
    if saved is None:
        return []
    diff = differences(saved, current)
    refused = {k: v for k, v in diff.items() if k not in EXTENSIBLE}
    if refused:
        lines = "\n".join(f"  {k}: {old!r} (checkpoint) -> {new!r} (now)"
                          for k, (old, new) in refused.items())
        raise ValueError(
            f"refusing to resume from {checkpoint}: these settings differ from the ones the run "
            f"was trained with:\n{lines}\nA resumed run may change only "
            f"{', '.join(EXTENSIBLE)}. Drop the changes to continue this run, or start a new one "
            "(a new train.output_dir, or train.resume=false to start over here).")
    return [f"{k} {old!r} -> {new!r}" for k, (old, new) in diff.items()
            if k not in ("train.resume", "train.output_dir")]
