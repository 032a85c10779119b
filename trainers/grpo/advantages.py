"""Group-relative advantages: each trajectory is scored against the other samples of its task.

GRPO (DeepSeekMath): ``A_i = (r_i − mean(r_g)) / (std(r_g) + ε)``.
Dr. GRPO: ``A_i = r_i − mean(r_g)`` — dividing by the group's std up-weights groups that are
nearly all right or all wrong, a difficulty bias, so Dr. GRPO drops it.

Members marked invalid (void or infrastructure-failed trajectories) take no part in their group's
statistics and get advantage 0; the trainer also zeroes their loss mask.
"""

from __future__ import annotations

from typing import Hashable, Sequence

import numpy as np


def group_advantages(rewards: Sequence[float], groups: Sequence[Hashable],
                     valid: Sequence[bool] | None = None, *, scale: str = "std",
                     eps: float = 1e-6) -> np.ndarray:
    """One advantage per trajectory.

    ``groups[i]`` names the group of trajectory ``i`` (trajectories of the same prompt share it).
    ``scale="std"``: GRPO, divide by the group's sample std (ddof=1, as ``torch.std``);
    ``scale="none"``: Dr. GRPO, centre only.  A group with fewer than two valid members, or with
    all rewards equal, gives zeros: it carries no learning signal.
    """
    if scale not in ("std", "none"):
        raise ValueError(f"scale must be 'std' (GRPO) or 'none' (Dr. GRPO), got {scale!r}")
    r = np.asarray(rewards, dtype=np.float64)
    if len(groups) != len(r):
        raise ValueError(f"got {len(r)} rewards but {len(groups)} group labels; pass one "
                         "group label per trajectory")
    ok = np.ones(len(r), bool) if valid is None else np.asarray(valid, dtype=bool)
    if not np.isfinite(r[ok]).all():
        raise ValueError("rewards must be finite; mark trajectories without a reward invalid")
    out = np.zeros(len(r))
    index: dict[Hashable, list[int]] = {}
    for i, g in enumerate(groups):
        if ok[i]:
            index.setdefault(g, []).append(i)
    for members in index.values():
        if len(members) < 2:
            continue
        values = r[members]
        centred = values - values.mean()
        if scale == "std":
            centred = centred / (values.std(ddof=1) + eps)
        out[members] = centred
    return out
