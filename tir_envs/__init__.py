"""tir_envs: Gymnasium environments for language models that reason with tools.

Importing the package registers the ``tir/*`` env ids with Gymnasium.
"""

import sys

if sys.version_info < (3, 11):  # asyncio.timeout, TaskGroup; pyproject says the same to pip
    raise ImportError(f"tir_envs needs Python >= 3.11, this is {sys.version.split()[0]}")

from tir_envs.env import TIREnv  # noqa: E402 - after the version check
from tir_envs.limits import GenerationLimits
from tir_envs.registry import ENV_SPECS, make, register_all
from tir_envs.task import Task
from tir_envs.trajectory import (EpisodeFailure, Trajectory, Turn, read_jsonl, to_padded,
                                 write_jsonl)

register_all()

__version__ = "0.1.0"
__all__ = ["TIREnv", "Task", "Trajectory", "Turn", "GenerationLimits", "EpisodeFailure", "make",
           "ENV_SPECS", "read_jsonl", "write_jsonl", "to_padded"]


def __getattr__(name: str):
    """``tir_envs.audit`` (the callable reward-hacking audit) is imported on first use."""
    if name == "audit":
        import importlib
        return importlib.import_module("tir_envs.audit")
    raise AttributeError(f"module 'tir_envs' has no attribute {name!r}")
