"""Registering the ``tir/*`` ids with Gymnasium without importing it at ``import tir_envs``.

Gymnasium pulls in NumPy, which made ``import tir_envs`` (and so ``tir-envs --help``) slow.  The
ids are registered the moment Gymnasium is imported instead: at once if it already is, else by
a finder on ``sys.meta_path`` that runs ``register_all`` right after the ``gymnasium`` module
finishes loading (and then removes itself).  So ``import tir_envs; import gymnasium as gym;
gym.make("tir/MathCode-v0")`` works in either import order, as before.
"""

from __future__ import annotations

import sys
from typing import Any


def register_when_gymnasium_loads() -> None:
    """Register now if Gymnasium is loaded, else as soon as it is."""
    if "gymnasium" in sys.modules:
        _register()
        return
    if not any(isinstance(f, _GymnasiumFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _GymnasiumFinder())


def _register() -> None:
    from tir_envs.registry import register_all
    register_all()


class _GymnasiumFinder:
    """Finds nothing itself: wraps the real loader of ``gymnasium`` so the tir ids are
    registered once the module has executed."""

    def find_spec(self, name: str, path: Any = None, target: Any = None):
        if name != "gymnasium":
            return None
        import importlib.util

        sys.meta_path.remove(self)  # the real finders find it; this one is done
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _RegisteringLoader(spec.loader)
        return spec


class _RegisteringLoader:
    """The real loader, then ``register_all``."""

    def __init__(self, loader: Any):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        _register()

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, is_package, ...
        return getattr(self.loader, name)
