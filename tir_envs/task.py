"""A task: one question an episode is about, with its gold answer."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence


class MissingAnswerWarning(UserWarning):
    """Tasks given as plain strings carry no gold answer: their episodes cannot be graded."""


#: said once per process (``warnings`` would repeat it under ``simplefilter("always")``)
_WARNED: list[bool] = []


def warn_no_answer() -> None:
    """Tell the user once that plain-string tasks score 0 with ``correct=None``, and how to
    give answers; inference-only runs legitimately have none, so it is not an error."""
    if _WARNED:
        return
    _WARNED.append(True)
    warnings.warn(
        "tasks given as plain strings have no gold answer: their episodes score 0 and "
        "trajectory.correct is None (fine for inference only). To grade them, give "
        "{'question': ..., 'answer': ...} dicts, Task(id, question, answer), or a dataset "
        "name or JSONL file with an 'answer' field.", MissingAnswerWarning, stacklevel=3)


@dataclass
class Task:
    """``question`` is shown to the policy; ``answer`` is only for the reward."""

    id: str
    question: str
    answer: Any = None
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def coerce(cls, obj: Any, index: int = 0) -> "Task":
        """A Task from a Task, a dict with ``question``/``problem``/``prompt``, or a string."""
        if isinstance(obj, Task):
            return obj
        if isinstance(obj, str):
            warn_no_answer()
            return cls(id=str(index), question=obj)
        if isinstance(obj, dict):
            question = next((obj[k] for k in ("question", "problem", "prompt") if k in obj), None)
            if not isinstance(question, str):
                raise ValueError(f"task {index} has no 'question' (or 'problem'/'prompt') "
                                 f"string; its keys are {sorted(obj)}")
            rest = {k: v for k, v in obj.items()
                    if k not in ("id", "question", "problem", "prompt", "answer", "meta")}
            meta = {**obj.get("meta", {}), **rest}
            return cls(id=str(obj.get("id", index)), question=question,
                       answer=obj.get("answer"), meta=meta)
        raise TypeError(f"task {index} must be a Task, dict or str, not {type(obj).__name__}")


def resolve_tasks(tasks: Any, load: Callable[[str], Sequence[Any]]) -> list[Task]:
    """The tasks an env was given: a list (Tasks, dicts, strings), or a string/path that
    ``load`` turns into records (a JSONL path, or a dataset name the env ships).

    ``None`` is no tasks (``reset(options={"task": ...})`` still works).  Anything else is a
    mistake worth an error: ``tasks="math500"`` must not become 7 one-letter tasks.
    """
    if tasks is None:
        return []
    if isinstance(tasks, (str, os.PathLike)):
        tasks = load(str(tasks))
    elif isinstance(tasks, (dict, Task)) or not isinstance(tasks, Sequence):
        raise TypeError(f"tasks must be a list of tasks (Task, dict or str), a JSONL path or a "
                        f"shipped dataset name; got {type(tasks).__name__}")
    return [Task.coerce(t, i) for i, t in enumerate(tasks)]
