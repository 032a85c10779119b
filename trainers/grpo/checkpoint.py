"""Checkpoints a run can resume from: model weights (a Hugging Face folder, loadable by
``from_pretrained`` and vLLM), optimizer, scheduler, task stream and RNG states.

A checkpoint is written to ``step_XXXXXXX.tmp`` and renamed when complete, so a crash mid-save
never leaves a checkpoint that looks valid.  Only the newest ``keep_last`` are kept.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import shutil
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch

PATTERN = re.compile(r"^step_(\d+)$")


def save_checkpoint(root: str | Path, step: int, model, optimizer, scheduler,
                    state: dict[str, Any], tokenizer=None, keep_last: int = 2) -> Path:
    root = Path(root)
    final = root / f"step_{step:07d}"
    tmp = root / f"step_{step:07d}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with _quiet_save():  # no "Writing model shards" bar per checkpoint on the step bar
        model.save_pretrained(tmp / "model", safe_serialization=True)
    if tokenizer is not None and hasattr(tokenizer, "save_pretrained"):
        tokenizer.save_pretrained(tmp / "model")
    torch.save({"step": step, "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "rng": _rng_state(), **state},
               tmp / "trainer_state.pt")
    if "config" in state:  # readable without loading the optimizer state (resume checks it)
        (tmp / "config.json").write_text(json.dumps(state["config"], indent=1, default=str),
                                          encoding="utf-8")
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    for old in list_checkpoints(root)[:-max(keep_last, 1)]:
        shutil.rmtree(old, ignore_errors=True)
    return final


@contextlib.contextmanager
def _quiet_save() -> Iterator[None]:
    """transformers' own progress bars off while a checkpoint is written, restored after."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # a model that is not a transformers model
        yield
        return
    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


def list_checkpoints(root: str | Path) -> list[Path]:
    """Complete checkpoints under ``root``, oldest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir()
             if p.is_dir() and (m := PATTERN.match(p.name))
             and (p / "trainer_state.pt").is_file()]
    return [p for _, p in sorted(found)]


def latest_checkpoint(root: str | Path) -> Path | None:
    found = list_checkpoints(root)
    return found[-1] if found else None


def load_checkpoint(path: str | Path, model, optimizer, scheduler) -> dict[str, Any]:
    """Restore weights, optimizer, scheduler and RNGs in place; return the saved state dict."""
    path = Path(path)
    load_weights(model, path / "model")
    state = torch.load(path / "trainer_state.pt", map_location="cpu", weights_only=False)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    _set_rng_state(state["rng"])
    return state


def saved_config(path: str | Path) -> dict[str, Any] | None:
    """The run config a checkpoint was written with (``None``: the checkpoint predates it)."""
    path = Path(path)
    if (path / "config.json").is_file():
        return json.loads((path / "config.json").read_text(encoding="utf-8"))
    state = torch.load(path / "trainer_state.pt", map_location="cpu", weights_only=False)
    return state.get("config")


def load_weights(model, folder: str | Path) -> None:
    """Load a ``save_pretrained`` folder's safetensors into ``model`` (which may be on GPU)."""
    from safetensors.torch import load_file

    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no .safetensors weights in {str(folder)!r}")
    weights: dict[str, torch.Tensor] = {}
    for f in files:
        weights.update(load_file(str(f)))
    missing, unexpected = model.load_state_dict(weights, strict=False)
    tied = {k for k in missing if _is_tied(model, k)}
    if set(missing) - tied or unexpected:
        raise ValueError(f"checkpoint {str(folder)!r} does not match the model: missing "
                         f"{sorted(set(missing) - tied)[:5]}, unexpected {sorted(unexpected)[:5]}")


def _is_tied(model, key: str) -> bool:
    tied = getattr(model, "_tied_weights_keys", None) or []
    return key in tied or (key.endswith("lm_head.weight") and
                           getattr(model.config, "tie_word_embeddings", False))


def _rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(),
             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
