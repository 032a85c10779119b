"""Per-token log-probabilities (and entropy) of a causal LM over right-padded sequences.

Column t holds log π(x_t | x_<t) at temperature T, i.e. ``log_softmax(logits_{t-1} / T)[x_t]``;
column 0 has no prediction and is 0.  This is the same quantity the rollout backends report for
sampled tokens (``HFPolicy``, ``VLLMPolicy`` with processed logprobs), so ratios start at 1.
Only positions from ``first`` on are projected onto the vocabulary (``logits_to_keep``), which
spares the prompt's ``[batch, prompt, vocab]`` logits on long prompts.  ``vocab`` (the
tokenizer's size) drops the padded embedding rows a model may have beyond it, as ``HFPolicy``
does when it samples, so both sides normalise over the same ids.
"""

from __future__ import annotations

import inspect

import torch


def token_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                   temperature: float = 1.0, first: int = 1, with_entropy: bool = False,
                   vocab: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``[B, T]`` log-probabilities (and entropies, detached) of ``input_ids`` under ``model``.

    ``first``: the earliest column that is needed (e.g. the shortest prompt length); columns
    before it are returned as 0.  ``vocab``: only the first ``vocab`` logits are a distribution
    (the tokenizer's ids); ``None`` uses every row.
    """
    b, t = input_ids.shape
    first = max(1, min(int(first), t - 1)) if t > 1 else 1
    keep = t - first + 1  # logits at positions first-1 .. t-1 predict tokens first .. t
    kwargs = {"input_ids": input_ids, "attention_mask": attention_mask, "use_cache": False}
    if _accepts_logits_to_keep(model):
        kwargs["logits_to_keep"] = keep
    logits = model(**kwargs).logits[:, -keep:-1] if t > 1 else None
    out = torch.zeros((b, t), dtype=torch.float32, device=input_ids.device)
    ent = torch.zeros_like(out) if with_entropy else None
    if logits is None:
        return out, ent
    logits = logits[..., :vocab].float() if vocab is not None else logits.float()
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    targets = input_ids[:, first:]
    norm = torch.logsumexp(logits, dim=-1)
    out[:, first:] = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - norm
    if with_entropy:  # H = log Z − Σ p·z, reusing log Z; the dot product as a batched matmul
        with torch.no_grad():  # (no [B, T, V] product tensor): a metric should cost little
            z, log_z = logits.detach(), norm.detach()
            p = torch.exp(z - log_z.unsqueeze(-1))
            ent[:, first:] = log_z - torch.einsum("btv,btv->bt", p, z)
    return out, ent


_ACCEPTS: dict[type, bool] = {}


def _accepts_logits_to_keep(model) -> bool:
    cls = type(model)
    if cls not in _ACCEPTS:
        try:
            _ACCEPTS[cls] = "logits_to_keep" in inspect.signature(model.forward).parameters
        except (TypeError, ValueError):
            _ACCEPTS[cls] = False
    return _ACCEPTS[cls]
