"""Tasks and the datasets shipped with the package."""

from tir_envs.data.task import Task

__all__ = ["Task"]
