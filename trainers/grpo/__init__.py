"""The bundled GRPO trainer for ``tir/*`` envs (see docs/grpo.md).

``GRPOTrainer(GRPOConfig.load("trainers/grpo/configs/toy.yaml")).train()``, or from the shell
``python -m trainers.grpo --config toy``.  Names are imported lazily so that the CLI's
``--help`` does not pay for torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "GRPOConfig": "trainers.grpo.config", "GRPOTrainer": "trainers.grpo.trainer",
    "policy_loss": "trainers.grpo.loss", "group_advantages": "trainers.grpo.advantages",
    "AccuracyBand": "trainers.grpo.filtering", "Group": "trainers.grpo.filtering",
    "fill_batch": "trainers.grpo.filtering", "ToyToolEnv": "trainers.grpo.toy_env",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'trainers.grpo' has no attribute {name!r}")
