"""The GRPO policy loss, in one function: clipped importance-weighted advantages, optional k3 KL
to a frozen reference, counted only where the loss mask is 1."""

from __future__ import annotations

import torch

AGGREGATIONS = ("token_mean", "seq_mean", "token_sum_norm")
MAX_LOG_RATIO = 20.0  # exp(20) ~ 5e8: keeps a stale sampler logprob from overflowing the ratio


def policy_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
                loss_mask: torch.Tensor, ref_logprobs: torch.Tensor | None = None, *,
                clip_low: float = 0.2, clip_high: float | None = None, kl_coef: float = 0.0,
                aggregation: str = "token_mean", denominator: float | None = None,
                max_len: int | None = None, weights: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, dict[str, float]]:
    r"""GRPO / Dr. GRPO / DAPO-style clipped surrogate.  All tensors are ``[N, T]`` (one row per
    trajectory, one column per token; ``advantages`` may be ``[N]`` and is broadcast).

    For token t of trajectory i with mask :math:`m_{i,t}\in\{0,1\}` and advantage :math:`A_i`:

        ρ_{i,t}  = exp(log π_θ(o_{i,t}) − log π_old(o_{i,t}))          (π_old: the sampler)
        ℓ_{i,t}  = −min(ρ_{i,t} A_i, clip(ρ_{i,t}, 1 − ε_low, 1 + ε_high) A_i) + β k3_{i,t}
        k3_{i,t} = exp(log π_ref − log π_θ) − (log π_ref − log π_θ) − 1   (≥ 0; KL(π_θ‖π_ref))

    ε_high defaults to ε_low (symmetric PPO); a larger ε_high is DAPO's clip-higher.  Aggregation:

        token_mean:     L = Σ_{i,t} m ℓ / Σ_{i,t} m              (DAPO's token-level mean)
        seq_mean:       L = (1/N) Σ_i Σ_t m ℓ / Σ_t m            (GRPO paper: mean per sequence)
        token_sum_norm: L = Σ_{i,t} m ℓ / (N · max_len)          (Dr. GRPO: a token-level sum over
                                                                  a constant, the token budget)

    ``weights`` (``[N, T]``, e.g. RITE's w_t) multiply each token's ℓ inside the sums; the divisors
    stay counts of masked tokens, so weights rescale tokens against each other.

    ``denominator`` overrides the divisor (Σ m, N or N·max_len) so that gradient accumulation
    over micro-batches of one mini-batch divides by the mini-batch's count, not each micro-batch's.
    Masked tokens carry exactly zero gradient: their log-ratio is set to 0 before anything else.
    Returns the scalar loss and detached statistics (clip fraction, KL, ratio) over masked tokens.
    """
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
    mask = loss_mask.to(logprobs.dtype)
    on = mask > 0
    adv = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
    log_ratio = torch.where(on, logprobs - old_logprobs, 0.0).clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)
    ratio = torch.exp(log_ratio)
    high = clip_low if clip_high is None else clip_high
    unclipped, clipped = ratio * adv, ratio.clamp(1.0 - clip_low, 1.0 + high) * adv
    per_token = -torch.minimum(unclipped, clipped)
    kl = torch.zeros_like(per_token)
    if ref_logprobs is not None:
        delta = torch.where(on, ref_logprobs - logprobs, 0.0).clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)
        kl = torch.exp(delta) - delta - 1.0
        per_token = per_token + kl_coef * kl
    per_token = per_token * mask
    if weights is not None:
        per_token = per_token * weights.to(per_token.dtype)
    if aggregation == "seq_mean":
        total = (per_token.sum(-1) / mask.sum(-1).clamp(min=1.0)).sum()
    else:
        total = per_token.sum()
    if denominator is None:
        denominator = default_denominator(loss_mask, aggregation, max_len)
    n = mask.sum().clamp(min=1.0)
    stats = {"clip_frac": float(((clipped < unclipped).to(mask.dtype) * mask).sum() / n),
             "kl": float((kl.detach() * mask).sum() / n),
             "ratio": float((ratio.detach() * mask).sum() / n)}
    return total / max(float(denominator), 1e-8), stats


def default_denominator(loss_mask: torch.Tensor, aggregation: str, max_len: int | None = None
                        ) -> float:
    """The divisor of ``policy_loss`` for a batch: Σ m (token_mean), N (seq_mean) or N·max_len."""
    if aggregation == "token_mean":
        return max(float(loss_mask.sum()), 1.0)
    if aggregation == "seq_mean":
        return float(loss_mask.shape[0])
    if aggregation == "token_sum_norm":
        if not max_len or max_len < 1:
            raise ValueError("aggregation='token_sum_norm' needs max_len, the fixed response "
                             "length budget it divides by (Dr. GRPO); pass max_len=<tokens>")
        return float(loss_mask.shape[0] * max_len)
    raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
