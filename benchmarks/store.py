"""The run folder: ``run.json`` (settings), ``samples.jsonl`` (one record per finished sample,
appended as samples finish), and the outputs rebuilt from them (summary, report, plots).

A run is resumable: reopening a folder checks that the settings are the same, and the samples
already recorded are never run again.  A sample whose episode failed for infrastructure
reasons (sandbox died, episode timeout) is not a finished sample: a rerun retries it, and the
newer record replaces it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Iterator

from tir_envs.bench.pins import pin_diff

CONFIG = "run.json"
FLUSH_S = 0.5
SAMPLES = "samples.jsonl"
#: settings that may differ between the sessions of one run (they do not change results)
_FREE = ("suites", "concurrency", "progress", "episode_timeout_s", "policy_name",
         "sampling_note", "by")


class RunFolderError(RuntimeError):
    """The run folder holds another run, or a damaged record."""


class RunStore:
    """Read and append to one run folder (see the module docstring)."""

    def __init__(self, folder: str | os.PathLike, config: dict[str, Any] | None = None):
        self.folder = Path(folder)
        self.samples_path = self.folder / SAMPLES
        if config is not None:
            self._claim(config)
        elif not (self.folder / CONFIG).is_file():
            raise RunFolderError(f"{self.folder} is not a benchmark run folder (no {CONFIG})")
        self.config = json.loads((self.folder / CONFIG).read_text(encoding="utf-8"))
        self.records: dict[tuple[str, int, int], dict[str, Any]] = {}
        for record in self._read():
            self.records[(record["suite"], record["item"], record["sample"])] = record

    def _claim(self, config: dict[str, Any]) -> None:
        config = check_settings(self.folder, config)
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / CONFIG
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(config, indent=2, sort_keys=True), encoding="utf-8")
        tmp.replace(path)

    def _read(self) -> Iterator[dict[str, Any]]:
        if not self.samples_path.is_file():
            return
        lines = self.samples_path.read_text(encoding="utf-8").splitlines()
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                if lineno == len(lines):  # cut off by an interrupt mid-write: not finished
                    return
                raise RunFolderError(f"{self.samples_path}:{lineno}: not a JSON record "
                                     f"({exc.msg}); remove the line to resume") from None
            yield record

    # -- queries --------------------------------------------------------------------
    def finished(self, suite: str) -> set[tuple[int, int]]:
        """``(item, sample)`` pairs of ``suite`` that need not run again."""
        return {(i, s) for (name, i, s), r in self.records.items()
                if name == suite and not r["infra_failed"]}

    def suite_records(self, suite: str) -> list[dict[str, Any]]:
        """The records of ``suite`` in (item, sample) order."""
        return [self.records[key] for key in sorted(k for k in self.records if k[0] == suite)]

    # -- writing --------------------------------------------------------------------
    def open_for_append(self):
        """The samples file, opened for appending; a last line cut off mid-write (by an
        interrupt) is dropped first: that sample was not finished."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.samples_path.is_file():
            data = self.samples_path.read_bytes()
            if data and not data.endswith(b"\n"):
                with open(self.samples_path, "r+b") as f:
                    f.truncate(data.rfind(b"\n") + 1)
        self._flushed = time.monotonic()
        return open(self.samples_path, "a", encoding="utf-8", buffering=1 << 20)

    def add(self, sink, record: dict[str, Any]) -> None:
        """Append ``record``.  Written through at most every ``FLUSH_S`` seconds (and when the
        sink closes, Ctrl-C included): a process killed outright loses at most that much
        work, which a rerun redoes; a flush per record cost more than the rest of the
        harness's work per sample."""
        sink.write(json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n")
        now = time.monotonic()
        if now - self._flushed >= FLUSH_S:
            sink.flush()
            self._flushed = now
        self.records[(record["suite"], record["item"], record["sample"])] = record


def check_settings(folder: str | os.PathLike, config: dict[str, Any]) -> dict[str, Any]:
    """The settings ``folder`` will hold once ``config`` joins it; raises ``RunFolderError``
    when the folder holds a run with other settings (or another policy).  Reads only."""
    path = Path(folder) / CONFIG
    if not path.is_file():
        return config
    old = json.loads(path.read_text(encoding="utf-8"))
    if old.get("policy") == config.get("policy") and \
            old.get("policy_pin") != config.get("policy_pin"):
        raise RunFolderError(
            f"{folder}: the policy changed since this run began ({config.get('policy')}: "
            f"{pin_diff(old.get('policy_pin'), config.get('policy_pin'))}); one run holds one "
            "policy's answers: restore it, or pass another --out")
    diff = {k: (old.get(k), config.get(k)) for k in set(old) | set(config)
            if k not in _FREE and k != "policy_pin" and old.get(k) != config.get(k)}
    if diff:
        shown = "; ".join(f"{k}: {a!r} in the folder, {b!r} now"
                          for k, (a, b) in sorted(diff.items()))
        raise RunFolderError(f"{folder} holds a run with other settings ({shown}); "
                             "resume it with the same settings or pass another --out")
    return {**config, "suites": _union(old.get("suites", []), config["suites"])}


def _union(old: list[str], new: list[str]) -> list[str]:
    return list(old) + [s for s in new if s not in old]
