"""What a GRPO step reports, and where it goes: ``metrics.jsonl`` always, TensorBoard and
Weights & Biases when they are installed (and asked for)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from tir_envs.status import Status
from tir_envs.trajectory import Trajectory
from tir_envs.trainers.grpo.filtering import Group, is_correct


def rollout_metrics(groups: Sequence[Group], threshold: float = 1.0) -> dict[str, float]:
    """Reward, accuracy, lengths and tool use over every sampled trajectory (kept or not).

    Tool use counts executed calls only: an action whose call could not be parsed is counted in
    ``parse_errors_per_episode``, not as code."""
    trajs: list[Trajectory] = [t for g in groups for t in g.trajectories]
    if not trajs:
        return {}
    reasons = [r for g in groups for r in (g.excluded or [None] * len(g.trajectories))]
    results = [r for t in trajs for turn in t.turns for r in turn.tool_results
               if r.get("executed")]
    rewards = np.array([t.reward for t in trajs], dtype=np.float64)
    return {
        "reward/mean": float(rewards.mean()),
        "reward/std": float(rewards.std()),
        "accuracy": float(np.mean([is_correct(t, threshold) for t in trajs])),
        "response_length": float(np.mean([t.num_policy_tokens for t in trajs])),
        "episode_length": float(np.mean([len(t.token_ids) for t in trajs])),
        "turns": float(np.mean([len(t.turns) for t in trajs])),
        "tool_calls_per_episode": float(np.mean([t.num_tool_calls for t in trajs])),
        "code_ratio": float(np.mean([t.num_tool_calls > 0 for t in trajs])),
        "parse_errors_per_episode": float(np.mean([t.num_parse_errors for t in trajs])),
        "tool_error_rate": (sum(Status(r.get("status", "ok")).failed for r in results)
                            / len(results) if results else 0.0),
        "infra_failed": float(np.mean([t.infra_failed for t in trajs])),
        "void": float(np.mean([r == "void" for r in reasons])),
        "truncated": float(np.mean([t.truncated for t in trajs])),
    }


class MetricsLogger:
    """Appends one JSON object per step to ``<dir>/metrics.jsonl`` and mirrors it to
    TensorBoard / W&B when available.  Non-finite values are written as ``null``."""

    def __init__(self, out_dir: str | Path, tensorboard: bool = True,
                 wandb_project: str | None = None, config: dict[str, Any] | None = None):
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "metrics.jsonl"
        self._tb = _tensorboard(self.dir / "tb") if tensorboard else None
        self._wandb = _wandb(wandb_project, config) if wandb_project else None

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        record = {"step": step, **{k: _finite(v) for k, v in metrics.items()}}
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        numbers = {k: v for k, v in record.items() if isinstance(v, (int, float)) and k != "step"}
        if self._tb is not None:
            for k, v in numbers.items():
                self._tb.add_scalar(k, v, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(numbers, step=step)

    def truncate_after(self, step: int) -> None:
        """On resume: drop records past the checkpoint's step, so the file has no duplicates."""
        if not self.path.exists():
            return
        lines = [ln for ln in self.path.read_text(encoding="utf-8").splitlines()
                 if ln.strip() and json.loads(ln).get("step", 0) <= step]
        self.path.write_text("".join(ln + "\n" for ln in lines), encoding="utf-8")

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _finite(v: Any) -> Any:
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, np.integer):
        return int(v)
    return v


def _tensorboard(folder: Path):
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard is not installed: JSONL only
        return None
    return SummaryWriter(str(folder))


def _wandb(project: str, config: dict[str, Any] | None):
    try:
        import wandb
    except ImportError as exc:
        raise ImportError(f"train.wandb_project={project!r} needs wandb: pip install wandb "
                          "(or unset train.wandb_project)") from exc
    return wandb.init(project=project, config=config or {})
