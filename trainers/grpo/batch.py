"""From groups of trajectories to the tensors one GRPO update consumes.

Rows are trajectories, columns are prompt + episode tokens (right-padded, ``to_padded``).
Excluded trajectories (void, infra-failed) are left out of the rows entirely: they would only
add zero-loss compute.  Each row carries its trajectory's advantage; the loss mask is the
ledger's (1 on policy tokens, 0 on the prompt, tool output and padding).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from tir_envs.trajectory import Trajectory, to_padded
from tir_envs.trainers.grpo.advantages import group_advantages
from tir_envs.trainers.grpo.filtering import Group


@dataclass
class TrainBatch:
    input_ids: torch.Tensor        # [N, T] long
    attention_mask: torch.Tensor   # [N, T] long
    loss_mask: torch.Tensor        # [N, T] float
    old_logprobs: torch.Tensor     # [N, T] float (sampler's; recomputed when missing)
    advantages: torch.Tensor       # [N] float
    prompt_lengths: torch.Tensor   # [N] long
    has_sampler_logprobs: bool
    ref_logprobs: torch.Tensor | None = None
    token_weights: torch.Tensor | None = None  # [N, T] float: per-token loss weights (RITE)

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def rows(self, index: Sequence[int] | torch.Tensor) -> "TrainBatch":
        """A sub-batch, trimmed to its own longest row (fewer padded columns to compute)."""
        idx = torch.as_tensor(index, dtype=torch.long)
        width = int(self.attention_mask[idx].sum(-1).max())
        cut = lambda x: None if x is None else x[idx, :width]  # noqa: E731
        return TrainBatch(cut(self.input_ids), cut(self.attention_mask), cut(self.loss_mask),
                          cut(self.old_logprobs), self.advantages[idx], self.prompt_lengths[idx],
                          self.has_sampler_logprobs, cut(self.ref_logprobs),
                          cut(self.token_weights))

    def to(self, device) -> "TrainBatch":
        move = lambda x: None if x is None else x.to(device)  # noqa: E731
        return TrainBatch(move(self.input_ids), move(self.attention_mask), move(self.loss_mask),
                          move(self.old_logprobs), move(self.advantages),
                          move(self.prompt_lengths), self.has_sampler_logprobs,
                          move(self.ref_logprobs), move(self.token_weights))

    @property
    def num_tokens(self) -> int:
        return int(self.attention_mask.sum())


def build_batch(groups: Sequence[Group], pad_id: int, scale: str = "std",
                max_length: int | None = None, weigh: Callable[[Trajectory], np.ndarray]
                | None = None) -> TrainBatch | None:
    """Advantages per group over valid members, then the padded tensors of valid members.
    ``weigh`` gives a trajectory's per-token loss weights (one per episode token).
    ``None`` when no trajectory is left to train on."""
    trajs: list[Trajectory] = []
    labels: list[int] = []
    valid: list[bool] = []
    for gi, g in enumerate(groups):
        trajs.extend(g.trajectories)
        labels.extend([gi] * len(g.trajectories))
        valid.extend(g.valid)
    adv = group_advantages([t.reward for t in trajs], labels, valid, scale=scale)
    keep = [i for i, ok in enumerate(valid) if ok and trajs[i].num_policy_tokens > 0]
    if not keep:
        return None
    rows = [trajs[i] for i in keep]
    arrays = to_padded(rows, pad_id=pad_id, max_length=max_length)
    weights = None
    if weigh is not None:
        weights = torch.zeros(arrays["loss_mask"].shape, dtype=torch.float32)
        for r, t in enumerate(rows):
            w = torch.from_numpy(weigh(t))
            first = int(arrays["prompt_lengths"][r])
            width = min(len(w), weights.shape[1] - first)
            weights[r, first:first + width] = w[:width]
    return TrainBatch(
        input_ids=torch.from_numpy(arrays["input_ids"]),
        attention_mask=torch.from_numpy(arrays["attention_mask"]),
        loss_mask=torch.from_numpy(arrays["loss_mask"]),
        old_logprobs=torch.from_numpy(arrays["logprobs"]),
        advantages=torch.from_numpy(np.asarray(adv[keep], dtype=np.float32)),
        prompt_lengths=torch.from_numpy(arrays["prompt_lengths"]),
        has_sampler_logprobs=all(t.has_logprobs for t in rows), token_weights=weights)
