"""The bundled GRPO trainer for ``tir/*`` envs (see docs/grpo.md).

``GRPOTrainer(GRPOConfig.load("trainers/grpo/configs/toy.yaml")).train()``, or from the shell
``python -m tir_envs.trainers.grpo --config toy``.  Names are imported lazily so that the CLI's
``--help`` does not pay for torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "GRPOConfig": "tir_envs.trainers.grpo.config", "GRPOTrainer": "tir_envs.trainers.grpo.trainer",
    "policy_loss": "tir_envs.trainers.grpo.loss", "group_advantages": "tir_envs.trainers.grpo.advantages",
    "AccuracyBand": "tir_envs.trainers.grpo.filtering", "Group": "tir_envs.trainers.grpo.filtering",
    "fill_batch": "tir_envs.trainers.grpo.filtering", "ToyToolEnv": "tir_envs.trainers.grpo.toy_env",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tir_envs.trainers.grpo' has no attribute {name!r}")
