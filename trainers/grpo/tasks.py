"""The tasks a run trains on, and the resumable stream that hands them out step by step.

Tasks come from ``data.path`` or, by default, from the env's own task list.  A path is read by
``data.loader`` when given (``"module:function"`` called as ``loader(path, **loader_kwargs)``:
the env family's own reader, e.g. ``tir_envs.data.math:load_math_tasks``, which knows its answer
fields), else as plain records with the project's loaders and their file:line:field errors.
``TaskStream`` walks them in a seeded shuffled order, epoch after epoch; its position is saved in
checkpoints so a resumed run sees the same tasks it would have seen.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from tir_envs.data.loaders import read_records
from tir_envs.trainers.common.eval_guard import check_training_tasks


def load_tasks(path: str | None, split: str, limit: int | None,
               env_factory: Callable[[], Any], loader: str | None = None,
               loader_kwargs: dict[str, Any] | None = None) -> list[Any]:
    """Tasks from ``path`` or the env's own, first ``limit`` of them."""
    if loader and not path:
        raise ValueError(f"data.loader={loader!r} needs data.path, the file it reads")
    if path and loader:
        from tir_envs.trainers.grpo.modeling import import_object
        tasks: list[Any] = list(import_object(loader)(path, **(loader_kwargs or {})))
    elif path:
        tasks = read_records(path, split=split)
    else:
        env = env_factory()
        try:
            tasks = list(getattr(env.unwrapped, "tasks", []) or [])
        finally:
            env.close()
        if not tasks:
            raise ValueError("the env has no tasks of its own: set data.path to a JSONL/Parquet "
                             "file (or env.kwargs.tasks if the env takes a dataset name)")
    if limit is not None:
        if limit < 1:
            raise ValueError(f"data.limit must be >= 1 or null, got {limit}")
        tasks = tasks[:limit]
    check_training_tasks(tasks, f"data.path={path!r}" if path else "the env's own tasks")
    return tasks


class TaskStream:
    """Hands out tasks in a shuffled order, reshuffling each epoch (seeded, resumable)."""

    def __init__(self, tasks: Sequence[Any], shuffle: bool = True, seed: int = 0):
        if not tasks:
            raise ValueError("TaskStream needs at least one task")
        self.tasks = list(tasks)
        self.shuffle, self.seed = shuffle, seed
        self.epoch, self.position = 0, 0
        self._order = self._make_order()

    def _make_order(self) -> np.ndarray:
        n = len(self.tasks)
        if not self.shuffle:
            return np.arange(n)
        return np.random.default_rng([self.seed, self.epoch]).permutation(n)

    def next(self, n: int) -> list[Any]:
        out = []
        for _ in range(n):
            if self.position >= len(self._order):
                self.epoch, self.position = self.epoch + 1, 0
                self._order = self._make_order()
            out.append(self.tasks[int(self._order[self.position])])
            self.position += 1
        return out

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self._order = self._make_order()
