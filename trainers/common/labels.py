"""How an adapter's dataset row names its task: a task id in the env's task set, or the whole
task inline as JSON (so the env needs no task set).  Shared by the OpenRLHF, verl and TRL
adapters; the label format is described in docs/openrlhf.md ("Dataset")."""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, Sequence

from tir_envs.task import Task
from tir_envs.trainers.common.env_config import EnvConfig
from tir_envs.trainers.common.eval_guard import check_training_tasks


class LabelError(ValueError):
    """A dataset label that names no task (the message says how to fix the dataset)."""


def task_label(task: Task, inline: bool = False) -> str:
    """The ``label`` field for ``task``: its id, or the whole task as JSON."""
    if not inline:
        return task.id
    return json.dumps({"id": task.id, "question": task.question, "answer": task.answer,
                       "meta": task.meta}, ensure_ascii=False, default=str)


def task_from_label(label: Any, tasks_by_id: Mapping[str, Task | None]) -> Task:
    """The task a label stands for: a task id, or a JSON object (string or dict) holding a
    whole task (``question`` …) or just an ``id``."""
    record = label
    if isinstance(label, str) and label.lstrip().startswith("{"):
        try:
            record = json.loads(label)
        except json.JSONDecodeError as exc:
            raise LabelError(f"label looks like JSON but is not ({exc.msg}): {label[:200]!r}") \
                from exc
    if isinstance(record, dict):
        if any(k in record for k in ("question", "problem", "prompt")):
            return Task.coerce(record)
        if "id" not in record:
            raise LabelError(f"a JSON label needs 'question' (a whole task) or 'id'; got keys "
                             f"{sorted(record)}")
        record = record["id"]
    if not isinstance(record, (str, int)) or isinstance(record, bool):
        raise LabelError(f"label must be a task id or a JSON task, got {type(label).__name__}")
    key = str(record)
    if key in tasks_by_id and tasks_by_id[key] is None:
        raise LabelError(f"task id {key!r} occurs twice in the env's task set, so a label cannot "
                         "name it; give tasks unique ids, or write the dataset with --inline")
    task = tasks_by_id.get(key)
    if task is None:
        raise LabelError(
            f"label {key[:200]!r} is not the id of any of the env's {len(tasks_by_id)} "
            "tasks; make the env with the task set the dataset was written from (tasks=... in "
            "TIR_ENV_KWARGS), or write the dataset with --inline so labels carry whole tasks")
    return task


def index_tasks(tasks: Sequence[Task]) -> dict[str, Task | None]:
    """Tasks by id; an id held by two tasks maps to ``None`` (a label cannot name it)."""
    out: dict[str, Task | None] = {}
    for task in tasks:
        out[task.id] = None if task.id in out else task
    return out


def records(config: EnvConfig, tokenizer: Any = None, inline: bool = False,
            limit: int | None = None) -> Iterable[dict[str, str]]:
    """``{"prompt", "label"}`` for each task of the env made from ``config``."""
    env = config.make(tokenizer)
    try:
        core = env.unwrapped
        every = list(core.tasks)
        tasks = every[:limit]
        check_training_tasks(tasks, f"{config.env_id} tasks={config.env_kwargs.get('tasks')!r}")
        if not inline:  # refused now, not at the trainer's first step: an id must name one task
            by_id = index_tasks(every)
            for task in tasks:
                task_from_label(task_label(task), by_id)
        for task in tasks:
            obs, _ = core.reset(options={"task": task})
            yield {"prompt": core.codec.decode(obs["tokens"].tolist()),
                   "label": task_label(task, inline)}
    finally:
        env.close()
