"""What the viewer can open, read into one list of episodes.

Three sources hold trajectories:
  * a benchmark run folder (``run.json`` + ``samples.jsonl``) or its ``samples.jsonl``: one record
    per sample, with the verdict and the ledger under ``"trajectory"``;
  * a trajectory JSONL (``tir_envs.rollout.collect(..., out=...)``, ``write_jsonl``), one ledger
    per line;
  * a folder of such files (the GRPO trainer's rollout dumps, one file per step).
Each becomes an :class:`EpisodeRow`: the row the run table shows plus the ledger itself
(named apart from the rollout runner's running ``RunnerEpisode``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from tir_envs.trajectory import Trajectory


class ViewSourceError(ValueError):
    """The path is not something the viewer can show (the message says what it expected)."""


@dataclass
class EpisodeRow:
    """One trajectory and the facts the run table shows about it."""

    trajectory: Trajectory
    part: str = ""
    item: int | str = ""
    sample: int | str = ""
    correct: bool | None = None
    gold: Any = None
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        """``failed`` (infrastructure or policy failure), ``correct``, ``incorrect`` or
        ``ungraded`` (the reward had no gold to judge against)."""
        if self.trajectory.infra_failed:
            return "failed"
        if self.correct is None:
            return "ungraded"
        return "correct" if self.correct else "incorrect"


def load_episodes(path: str | Path) -> tuple[list[EpisodeRow], dict[str, Any]]:
    """Every episode under ``path`` and the run's settings (``run.json``; empty otherwise)."""
    p = Path(path)
    if not p.exists():
        raise ViewSourceError(f"{p} does not exist; pass a benchmark run folder, a "
                              "samples.jsonl, a trajectory JSONL or a folder of them")
    if p.is_dir():
        return _load_folder(p)
    return list(_read_file(p)), {}


def _load_folder(folder: Path) -> tuple[list[EpisodeRow], dict[str, Any]]:
    run_json = folder / "run.json"
    settings = json.loads(run_json.read_text(encoding="utf-8")) if run_json.is_file() else {}
    if (folder / "samples.jsonl").is_file():
        return list(_read_file(folder / "samples.jsonl")), settings
    files = sorted(folder.glob("*.jsonl"))
    if not files:
        raise ViewSourceError(f"{folder} holds no samples.jsonl and no *.jsonl trajectory "
                              "files; pass a benchmark run folder or a trajectory JSONL")
    episodes = []
    for f in files:
        step = _step_of(f)
        for e in _read_file(f):
            if e.extra.get("step") is None and step is not None:
                e.extra["step"] = step  # a GRPO dump: rollouts/step_NNNNN.jsonl
            episodes.append(e)
    return episodes, settings


def _step_of(path: Path) -> int | None:
    """The training step a dump file's name gives (``step_00012.jsonl``: 12)."""
    match = re.fullmatch(r"step_(\d+)", path.stem)
    return int(match[1]) if match else None


def _read_file(path: Path) -> Iterator[EpisodeRow]:
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield _episode(json.loads(line), f"{path.name}:{lineno}")
            except json.JSONDecodeError as exc:
                raise ViewSourceError(f"{path}:{lineno}: not JSON ({exc.msg})") from None
            except (TypeError, ValueError, KeyError) as exc:
                raise ViewSourceError(f"{path}:{lineno}: neither a benchmark sample record nor "
                                      f"a trajectory ({exc})") from None


def _episode(obj: dict[str, Any], where: str) -> EpisodeRow:
    if not isinstance(obj, dict):
        raise TypeError(f"a line holds a {type(obj).__name__}, not an object")
    if "trajectory" in obj:  # a benchmark sample record
        traj = Trajectory.from_dict(obj["trajectory"])
        return EpisodeRow(traj, part=f"{obj.get('suite', '')}/{obj.get('part', '')}".strip("/"),
                       item=obj.get("item", ""), sample=obj.get("sample", ""),
                       correct=obj.get("correct"), gold=obj.get("gold"), source=where,
                       extra={"seed": obj.get("seed"), "task_id": obj.get("task_id")})
    traj = Trajectory.from_dict(obj)
    meta = traj.metadata
    return EpisodeRow(traj, part=traj.env_id, item=meta.get("group", traj.task_id),
                   sample=meta.get("sample", ""), correct=traj.correct, gold=meta.get("gold"),
                   source=where, extra={"task_id": traj.task_id, "step": meta.get("step")})
