"""Benchmark suites as a run names them: the shipped catalogue (``tir_envs.data.suites``, one
record per suite), custom suites over one's own task file (``custom:FILE``), and the lookup by
name that knows both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from tir_envs.data.suites import (AUTOTIR_PARTS, MATH_SUITES, PARTS, QA_SUITES, SCORING,
                                  SUITE_ALIASES, SUITES, Part, Suite, SuiteDataError,
                                  file_sha256, suite_name)
from tir_envs.task import Task

__all__ = ["AUTOTIR_PARTS", "CUSTOM", "MATH_SUITES", "PARTS", "QA_SUITES", "SCORING",
           "SUITE_ALIASES", "SUITES", "Part", "Suite", "SuiteDataError", "custom_name",
           "custom_pin", "custom_suite", "file_sha256", "get_suite", "register", "suite_name",
           "suite_of_run"]

# ------------------------------------------------------------------------------ custom
CUSTOM = "custom:"


def _env_record(env_id: str) -> Any:
    """The env's class, which records how it is evaluated (``scoring``, ``eval_kwargs``,
    ``eval_options``; none of them on an env registered as a plain factory function, and
    ``None`` for an id not registered in this process: a report rebuilding a user's suite from
    its pins without ``--import``)."""
    import gymnasium as gym

    from tir_envs.registry import env_class
    try:
        return env_class(env_id)
    except gym.error.Error:
        return None


def _load_custom(path: Path, env_id: str) -> list[Task]:
    """A JSONL/parquet file's tasks: math files through the math loader (``problem``/
    ``solution`` fields, boxed answers), others as ``question``/``answer`` records."""
    if env_id == "tir/MathCode-v0":
        from tir_envs.data.math import load_math_tasks
        return load_math_tasks(path)
    from tir_envs.data.loaders import read_records
    return [Task.coerce(r, i) for i, r in enumerate(read_records(path))]


def custom_suite(file: str | Path, env_id: str | None = None, scoring: str | None = None,
                 sha256: str | None = None, count: int | None = None) -> Suite:
    """A suite over one's own task file (``--tasks FILE``, ``--suite custom:FILE``), pinned like
    a shipped part: by the file's sha256 and item count (``sha256``/``count``: the pins of an
    earlier session of the run; by default, the file as it is now).  It is named by the file's
    name and content hash (``custom_name``); a run's ``run.json`` keeps where the file was."""
    from tir_envs.registry import is_env_id, known_ids

    path = Path(file).expanduser().resolve()
    env_id = env_id or "tir/MathCode-v0"
    if sha256 is None and not is_env_id(env_id):  # a run's pins name an env checked then
        raise ValueError(f"unknown env {env_id!r} for custom tasks; envs: "
                         f"{', '.join(known_ids())} (your own env: gymnasium.register it and "
                         "pass --import MODULE)")
    record = _env_record(env_id)
    scoring = scoring or getattr(record, "scoring", None)
    if scoring is None:
        raise ValueError(f"custom tasks on your own env {env_id!r}: say how answers compare "
                         f"with scoring= (--scoring), one of {', '.join(SCORING)}, or give the "
                         "env class a scoring attribute")
    if scoring not in SCORING:
        raise ValueError(f"scoring must be one of {', '.join(SCORING)}, got {scoring!r}")
    if not path.is_file():
        raise SuiteDataError(f"custom tasks {str(file)!r}: no such file")
    if sha256 is None:
        sha256 = file_sha256(path)
        count = len(_load_custom(path, env_id))
        if not count:
            raise SuiteDataError(f"custom tasks {path}: no records")
    part = Part(path.stem, str(path), int(count or 0), sha256,
                lambda: _load_custom(path, env_id), scoring)
    return Suite(custom_name(path, sha256), env_id, (part,),
                 dict(getattr(record, "eval_kwargs", {})),
                 tuple(getattr(record, "eval_options", ())), f"custom tasks from {path}")


def custom_name(path: Path, sha256: str) -> str:
    """A custom suite's name: the file's name and the start of its content hash, never its
    folder, so the same file anywhere is the same benchmark (``bench compare`` pairs it) and
    an edited file is another one."""
    return f"{CUSTOM}{path.name}@{sha256[:12]}"


def custom_pin(suite: Suite) -> dict[str, Any]:
    """What ``run.json`` keeps of a custom suite to rebuild and re-check it."""
    part = suite.parts[0]
    return {"file": part.file, "sha256": part.sha256, "count": part.count,
            "env_id": suite.env_id, "scoring": part.scoring}


def get_suite(name: str) -> Suite:
    """The suite called ``name`` (``custom:FILE``: one's own task file), with an error listing
    the known suites."""
    if name.startswith(CUSTOM) and name not in SUITES:
        return custom_suite(name[len(CUSTOM):])
    name = suite_name(name)
    if name not in SUITES:
        raise KeyError(f"unknown suite {name!r}; known suites: {', '.join(SUITES)}, or "
                       "custom:FILE for your own tasks")
    return SUITES[name]


def suite_of_run(name: str, config: Mapping[str, Any]) -> Suite:
    """The suite ``name`` as the run whose ``run.json`` is ``config`` ran it (a custom suite
    rebuilt from its pins, so a changed file fails when its tasks load)."""
    pin = (config.get("custom") or {}).get(name)
    if pin is not None:
        return custom_suite(pin["file"], pin["env_id"], pin["scoring"], pin["sha256"],
                            pin["count"])
    return get_suite(name)


def register(suite: Suite) -> None:
    """Add (or replace) a suite, e.g. one over your own pinned data file."""
    SUITES[suite.name] = suite
