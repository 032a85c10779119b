"""Training on an evaluation set is a silent leak: the guard names it before any work is done.

Every task set the package ships for ``tir-envs bench`` (MATH-500, AIME, GSM8K, HotpotQA and
friends, IFEval, Spider, LogiQA, ...) is an evaluation set.  A run that trains on one of them,
by name or through a copy of the file anywhere on disk, reports benchmark numbers that mean
nothing.  The guard matches questions, not paths: each training task's question (whitespace
collapsed, case folded) against those of every bench suite, and says which suites overlap and
how much.  It warns (loudly: a warning and a stderr line) rather than refusing, since a smoke
run or an ablation may do this on purpose; ``strict=True`` refuses.
"""

from __future__ import annotations

import functools
import hashlib
import re
import sys
import warnings
from typing import Any, Iterable, Mapping

_SPACE = re.compile(r"\s+")


class EvalOverlapError(ValueError):
    """Training tasks found in a shipped evaluation suite (``strict`` mode)."""


class EvalOverlapWarning(UserWarning):
    """Training tasks found in a shipped evaluation suite."""


def _fingerprint(question: Any) -> str | None:
    if not isinstance(question, str) or not question.strip():
        return None
    text = _SPACE.sub(" ", question).strip().casefold()
    return hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()


def _question(task: Any) -> Any:
    if isinstance(task, Mapping):
        return task.get("question", task.get("problem"))
    return getattr(task, "question", None)


@functools.lru_cache(maxsize=1)
def evaluation_fingerprints() -> dict[str, str]:
    """``fingerprint -> suite`` over every shipped bench suite (loaded once per process)."""
    from tir_envs.data.suites import SUITES

    out: dict[str, str] = {}
    for name, suite in SUITES.items():
        for part in suite.parts:
            try:
                tasks = part.tasks()
            except Exception:  # a part whose data is not installed cannot leak either
                continue
            for task in tasks:
                key = _fingerprint(_question(task))
                if key is not None:
                    out.setdefault(key, name)
    return out


def evaluation_overlap(tasks: Iterable[Any]) -> dict[str, int]:
    """``suite -> how many of tasks`` are that suite's questions."""
    known = evaluation_fingerprints()
    hits: dict[str, int] = {}
    for task in tasks:
        suite = known.get(_fingerprint(_question(task)) or "")
        if suite is not None:
            hits[suite] = hits.get(suite, 0) + 1
    return hits


def check_training_tasks(tasks: Iterable[Any], where: str, strict: bool = False) -> dict[str, int]:
    """Warn (``strict``: refuse) when ``tasks`` hold questions of a shipped evaluation suite.

    ``where`` names the setting that chose the tasks, so the message says what to change."""
    tasks = list(tasks)
    hits = evaluation_overlap(tasks)
    if not hits:
        return hits
    found = ", ".join(f"{n} of the '{s}' suite" for s, n in sorted(hits.items()))
    message = (f"{where}: {sum(hits.values())} of {len(tasks)} training tasks are evaluation "
               f"questions ({found}). Benchmark results of a model trained on them mean nothing "
               "on those suites. Train on a training split (docs/grpo.md, 'Training data'); "
               "keep this only for a smoke run.")
    if strict:
        raise EvalOverlapError(message)
    warnings.warn(message, EvalOverlapWarning, stacklevel=2)
    print(f"WARNING: {message}", file=sys.stderr, flush=True)
    return hits
