"""Which trajectories and groups a GRPO step trains on.

* Trajectories are **excluded** (kept in the batch for statistics, zero loss) when their
  environment failed (``infra_failed``: a sandbox died, a retriever was down — not the model's
  fault) or when they are **void**: no tool call and no answer (ZeroTIR masks these).
* Groups are **kept** only if their accuracy lies in a band: all-right and all-wrong groups give
  zero advantage everywhere, and near-saturated ones give little.  ZeroTIR keeps [0.2, 0.8];
  RITE keeps pass rates in [0.1, 0.9].
* With ``pass_rate: running`` (RITE) a group's accuracy is its task's **running pass rate**: every
  sample of that task seen so far, across epochs, this group included (``RunningPassRate``).
* ``fill_batch`` keeps sampling fresh groups until the batch is full again (DAPO-style refill).

Both read the trajectory's typed outcome, set by the env's reward: ``answered`` (``None``: the
env does not say, and the trajectory is never void) and ``correct`` (``None``: no verdict, so
``reward >= threshold`` decides).  "No tool call" counts executed calls only: an action whose
call could not be parsed made none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from tir_envs.trajectory import Trajectory

BAND_PRESETS = {"zerotir": (0.2, 0.8), "rite": (0.1, 0.9), "nonzero_var": (1e-9, 1 - 1e-9)}


@dataclass
class Group:
    """The G samples of one task: the unit of group-relative advantages and of filtering."""

    key: str
    trajectories: list[Trajectory]
    excluded: list[str | None] = field(default_factory=list)  # per trajectory: why, or None

    @property
    def valid(self) -> list[bool]:
        return [reason is None for reason in self.excluded] or [True] * len(self.trajectories)


def has_answer(traj: Trajectory) -> bool | None:
    """Whether the policy gave an answer, as the env reported it (``None``: not reported)."""
    return traj.answered


def is_correct(traj: Trajectory, threshold: float = 1.0) -> bool:
    """Correctness: the trajectory's ``correct`` verdict, else ``reward >= threshold``."""
    return traj.correct if traj.correct is not None else traj.reward >= threshold


def exclusion_reason(traj: Trajectory, mask_void: bool = True, mask_infra: bool = True
                     ) -> str | None:
    """``"infra"``, ``"void"`` or ``None`` (train on it)."""
    if mask_infra and traj.infra_failed:
        return "infra"
    if mask_void and traj.num_tool_calls == 0 and has_answer(traj) is False:
        return "void"
    return None


def mark_exclusions(group: Group, mask_void: bool = True, mask_infra: bool = True) -> Group:
    group.excluded = [exclusion_reason(t, mask_void, mask_infra) for t in group.trajectories]
    return group


@dataclass(frozen=True)
class AccuracyBand:
    """Keep a group when ``low <= accuracy <= high`` over its valid members."""

    low: float = 0.0
    high: float = 1.0
    threshold: float = 1.0  # reward at or above which a trajectory counts as correct

    def __post_init__(self):
        if not 0.0 <= self.low <= self.high <= 1.0:
            raise ValueError(f"accuracy band must satisfy 0 <= low <= high <= 1, got "
                             f"[{self.low}, {self.high}]")

    @classmethod
    def parse(cls, spec: Any, threshold: float = 1.0) -> "AccuracyBand | None":
        """``None``/``"none"`` (no filter), a preset name (``zerotir``, ``rite``,
        ``nonzero_var``) or ``[low, high]``."""
        if spec is None or spec == "none":
            return None
        if isinstance(spec, str):
            if spec not in BAND_PRESETS:
                raise ValueError(f"unknown accuracy band {spec!r}; use one of "
                                 f"{sorted(BAND_PRESETS)}, [low, high] or none")
            return cls(*BAND_PRESETS[spec], threshold=threshold)
        if isinstance(spec, (list, tuple)) and len(spec) == 2:
            return cls(float(spec[0]), float(spec[1]), threshold=threshold)
        raise ValueError(f"accuracy band must be a preset name, [low, high] or none; got {spec!r}")

    def accuracy(self, group: Group) -> float | None:
        hits = [is_correct(t, self.threshold) for t, ok in zip(group.trajectories, group.valid)
                if ok]
        return sum(hits) / len(hits) if hits else None

    def keep(self, group: Group) -> bool:
        return self.contains(self.accuracy(group))

    def contains(self, accuracy: float | None) -> bool:
        return accuracy is not None and self.low <= accuracy <= self.high


class RunningPassRate:
    """Per task: correct samples / samples over every group of it seen so far (kept across
    epochs and checkpoints), so a task's standing does not hang on one group of G samples."""

    def __init__(self, threshold: float = 1.0):
        self.threshold = threshold
        self.counts: dict[str, list[int]] = {}  # task id -> [correct, samples]

    def update(self, group: Group) -> float | None:
        """Add ``group``'s valid samples to its task's count; the task's running rate after."""
        hits = [is_correct(t, self.threshold) for t, ok in zip(group.trajectories, group.valid)
                if ok]
        key = task_key(group)
        count = self.counts.setdefault(key, [0, 0])
        count[0] += sum(hits)
        count[1] += len(hits)
        return self.rate(key)

    def rate(self, key: str) -> float | None:
        count = self.counts.get(key)
        return count[0] / count[1] if count and count[1] else None

    def state_dict(self) -> dict[str, list[int]]:
        return {k: list(v) for k, v in self.counts.items()}

    def load_state_dict(self, state: dict[str, list[int]]) -> None:
        self.counts = {k: [int(v[0]), int(v[1])] for k, v in state.items()}


def task_key(group: Group) -> str:
    """The task a group belongs to: its trajectories' ``task_id`` (the group key if unset)."""
    ids = {t.task_id for t in group.trajectories if t.task_id}
    return ids.pop() if len(ids) == 1 else group.key


@dataclass
class FillResult:
    groups: list[Group]       # the kept groups, at most ``need``
    sampled: list[Group]      # every group rolled out (for metrics)
    rounds: int


def fill_batch(sample: Callable[[int], Sequence[Group]], need: int,
               keep: Callable[[Group], bool] | None = None, max_rounds: int = 4,
               oversample: float = 1.0) -> FillResult:
    """Roll out groups until ``need`` pass ``keep`` or ``max_rounds`` rounds were spent.

    ``sample(n)`` rolls out ``n`` fresh groups.  Each round asks for the missing count times
    ``oversample`` (so a filter that rejects half the groups needs ``oversample=2`` for one
    round).  If the rounds run out the batch is smaller; the trainer logs how full it was.
    """
    if need < 1:
        raise ValueError(f"need must be >= 1, got {need}")
    kept: list[Group] = []
    sampled: list[Group] = []
    rounds = 0
    while len(kept) < need and rounds < max(1, max_rounds):
        ask = max(1, int(round((need - len(kept)) * max(oversample, 1.0))))
        fresh = list(sample(ask))
        sampled.extend(fresh)
        kept.extend(g for g in fresh if keep is None or keep(g))
        rounds += 1
    return FillResult(kept[:need], sampled, rounds)
