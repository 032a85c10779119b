"""The Python code tool and its sandboxes (see docs/sandbox.md).

``PythonTool`` runs the model's code in one persistent, isolated interpreter per episode.
Backends: the local pool of pre-forked interpreters (default), E2B (``e2b`` extra) and Ray
actors (``ray`` extra).
"""

from tir_envs.tools.python.backends.base import SandboxBackend, SandboxUnavailable
from tir_envs.tools.python.backends.registry import make_backend
from tir_envs.tools.python.execution import Execution
from tir_envs.tools.python.limits import Limits
from tir_envs.tools.python.backends.local import LocalBackend
from tir_envs.tools.python.pool.sandbox_pool import (PoolConfig, SandboxPool, get_pool,
                                                     shutdown_pools)
from tir_envs.tools.python.tool import PythonSession, PythonTool

__all__ = ["Execution", "Limits", "LocalBackend", "PoolConfig", "PythonSession", "PythonTool",
           "SandboxBackend", "SandboxPool", "SandboxUnavailable", "get_pool", "make_backend",
           "shutdown_pools"]
