"""Model, tokenizer, device and precision for a run.

Precision: on GPU, ``dtype: auto`` keeps fp32 master weights and runs forward passes under bf16
autocast (the usual mixed-precision recipe); ``dtype: bf16`` stores the weights in bf16 (half
the memory, less exact updates).  On CPU everything is fp32.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import torch

from tir_envs.trainers.grpo.config import ModelConfig


def resolve_device(spec: str) -> torch.device:
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(spec)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"model.device={spec!r} but no CUDA device is available; use auto or cpu")
    return device


def import_object(spec: str) -> Any:
    """``"package.module:name"`` -> the object."""
    from tir_envs.user_modules import resolve

    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"{spec!r} is not of the form 'package.module:name'")
    try:
        return resolve(spec, "config")
    except ImportError as exc:
        raise ValueError(f"cannot import {spec!r}: {exc}") from exc


def load_tokenizer(cfg: ModelConfig):
    """``model.tokenizer`` in any spelling ``tir_envs.tokenizer.load_tokenizer`` accepts;
    ``None``: the model folder's, else the bundled Qwen2.5."""
    from tir_envs.tokenizer import load_tokenizer as resolve

    return resolve(cfg.tokenizer if cfg.tokenizer is not None else cfg.path)


def load_model(cfg: ModelConfig, tokenizer, device: torch.device):
    """The policy: random weights from ``random_init`` (a config dict) or ``path``."""
    from transformers import AutoConfig, AutoModelForCausalLM

    dtype = torch.bfloat16 if cfg.dtype == "bf16" else torch.float32
    if cfg.random_init is not None:
        fields = dict(cfg.random_init)
        kind = fields.pop("model_type", "qwen2")
        fields.setdefault("vocab_size", len(tokenizer))
        for name in ("eos_token_id", "pad_token_id"):
            if getattr(tokenizer, name, None) is not None:
                fields.setdefault(name, getattr(tokenizer, name))
        config = AutoConfig.for_model(kind, **fields)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed)
            model = AutoModelForCausalLM.from_config(config)
        model = model.to(dtype)
    else:
        model = AutoModelForCausalLM.from_pretrained(cfg.path, dtype=dtype)
    if model.config.vocab_size < len(tokenizer):
        raise ValueError(f"the model's vocabulary ({model.config.vocab_size}) is smaller than the "
                         f"tokenizer's ({len(tokenizer)}); use the model's own tokenizer")
    model.to(device)
    if cfg.gradient_checkpointing:
        set_checkpointing(model, True)
    return model.eval()


def set_checkpointing(model, on: bool) -> None:
    """Recompute activations in backward (less memory, ~1/3 more compute).  transformers 5
    calls it activation checkpointing; older versions gradient checkpointing."""
    if hasattr(model, "activation_checkpointing_enable"):
        if on:
            model.activation_checkpointing_enable({"use_reentrant": False})
        else:
            model.activation_checkpointing_disable()
    elif on:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_disable()


def frozen_copy(model):
    """A frozen reference policy (for the KL term): same weights, no gradients."""
    ref = copy.deepcopy(model)
    set_checkpointing(ref, False)
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref.eval()


def autocast(device: torch.device, dtype: str):
    """bf16 autocast for ``dtype: auto`` on GPU; a no-op otherwise."""
    if device.type == "cuda" and dtype == "auto":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()
