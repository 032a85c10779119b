"""tir_envs: Gymnasium environments for language models that reason with tools.

Importing the package registers the ``tir/*`` env ids with Gymnasium: at once when Gymnasium
is loaded, else the moment it is (``tir_envs.gym_hook``), so ``import tir_envs`` itself stays
light (no Gymnasium, NumPy or transformers) and ``tir-envs --help`` starts fast.  The names
below are imported on first use.
"""

import importlib
import sys

if sys.version_info < (3, 11):  # asyncio.timeout, TaskGroup; pyproject says the same to pip
    raise ImportError(f"tir_envs needs Python >= 3.11, this is {sys.version.split()[0]}")

from tir_envs.gym_hook import register_when_gymnasium_loads  # noqa: E402 - after the check

register_when_gymnasium_loads()

__version__ = "0.1.0"

#: public name -> the module that defines it (imported on first use)
_LAZY = {
    "TIREnv": "tir_envs.env", "GenerationLimits": "tir_envs.limits",
    "ENV_SPECS": "tir_envs.registry", "make": "tir_envs.registry",
    "register_all": "tir_envs.registry", "Task": "tir_envs.task",
    "EpisodeFailure": "tir_envs.trajectory", "Trajectory": "tir_envs.trajectory",
    "Turn": "tir_envs.trajectory", "read_jsonl": "tir_envs.trajectory",
    "to_padded": "tir_envs.trajectory", "write_jsonl": "tir_envs.trajectory",
}
__all__ = ["TIREnv", "Task", "Trajectory", "Turn", "GenerationLimits", "EpisodeFailure", "make",
           "ENV_SPECS", "read_jsonl", "write_jsonl", "to_padded"]


def __getattr__(name: str):
    """The public names, and ``tir_envs.audit`` (the callable reward-hacking audit), imported
    on first use."""
    if name == "audit":
        return importlib.import_module("tir_envs.audit")
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tir_envs' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, "audit"})
