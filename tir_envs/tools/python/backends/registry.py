"""The sandbox backends by name: ``make_backend("local" | "e2b" | "ray", **options)``.

Kept apart from ``backend`` (the interface every backend implements): each backend module
imports that interface, and this module imports the backends, so nothing imports in a loop.
"""

from __future__ import annotations

from typing import Any, Mapping

from tir_envs.tools.python.backends.base import SandboxBackend

__all__ = ["make_backend"]


def make_backend(spec: Any, **options: Any) -> SandboxBackend:
    """``"local"`` / ``"e2b"`` / ``"ray"`` (with ``options``), a mapping of a name and its options
    (``{"name": "ray", "num_hosts": 4, "actor_options": {...}}``: what JSON settings such as an
    adapter's env kwargs can carry), or a ready backend object."""
    if isinstance(spec, Mapping):
        if not isinstance(spec.get("name"), str):
            raise ValueError(f"a backend mapping needs its 'name' ('local', 'e2b' or 'ray') "
                             f"next to its options, e.g. {{'name': 'ray', 'num_hosts': 4}}; "
                             f"got {dict(spec)!r}")
        given = {k: v for k, v in spec.items() if k != "name"}
        return make_backend(spec["name"], **{**given, **options})
    if isinstance(spec, SandboxBackend):
        if options:
            raise ValueError(f"backend options {sorted(options)} only apply when backend is a "
                             "name; configure the backend object instead")
        return spec
    if spec == "local":
        from tir_envs.tools.python.backends.local import LocalBackend
        return LocalBackend(**options)
    if spec == "e2b":
        from tir_envs.tools.python.backends.e2b import E2BBackend
        return E2BBackend(**options)
    if spec == "ray":
        from tir_envs.tools.python.backends.ray_backend import RayBackend
        return RayBackend(**options)
    raise ValueError(f"backend must be 'local', 'e2b', 'ray' or a SandboxBackend instance, "
                     f"got {spec!r}")
