"""How the CLI reports each step: a progress bar (ETA, running reward) on a terminal, one JSON
line per step otherwise (logs, pipes, CI), so a person watching sees where the run is and a
program reading stdout gets records it can parse.  Files (``metrics.jsonl``, TensorBoard, W&B)
are written by ``MetricsLogger`` either way."""

from __future__ import annotations

import json
import sys
from collections import deque
from typing import Any, TextIO

#: the metrics of a JSON line (those present and numeric)
LINE_KEYS = ("reward/mean", "accuracy", "code_ratio", "response_length", "kl", "clip_frac",
             "entropy", "time/step_s")


class StepReporter:
    """Call with each step's metrics.  ``stream`` (default stdout) decides the form: a tty gets
    a ``tqdm`` bar over the run's steps with the mean reward of the last ``window`` steps."""

    def __init__(self, start: int, total: int, stream: TextIO | None = None, window: int = 10):
        self.stream = stream or sys.stdout
        self.rewards: deque[float] = deque(maxlen=window)
        self.bar = None
        if _is_tty(self.stream) and total > start:
            from tqdm import tqdm
            self.bar = tqdm(total=total, initial=start, unit="step", file=self.stream,
                            dynamic_ncols=True, desc="grpo")

    def __call__(self, record: dict[str, Any]) -> None:
        reward = record.get("reward/mean")
        if isinstance(reward, (int, float)):
            self.rewards.append(float(reward))
        if self.bar is None:
            line = {"step": record["step"], **{k: round(record[k], 4) for k in LINE_KEYS
                                               if isinstance(record.get(k), float)}}
            print(json.dumps(line), file=self.stream, flush=True)
            return
        if self.rewards:
            self.bar.set_postfix(reward=f"{sum(self.rewards) / len(self.rewards):.3f}",
                                 refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _is_tty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
