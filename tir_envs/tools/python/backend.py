"""What a Python sandbox backend provides to ``PythonTool`` (local pool, E2B, Ray).

A backend opens *handles* (one interpreter each), runs code in them and closes them.  It
reports everything the code did as an ``Execution``; it raises only ``SandboxUnavailable``
from ``open`` when no interpreter can be had (the tool turns that into ``infra_error``).
Restarting after a lost interpreter is the tool's job, so every backend behaves the same.
"""

from __future__ import annotations

import abc
from typing import Any, Mapping

from tir_envs.tools.python.execution import Execution
from tir_envs.tools.python.limits import Limits
from tir_envs.tools.base import SandboxUnavailable

__all__ = ["SandboxBackend", "SandboxUnavailable", "make_backend"]


class SandboxBackend(abc.ABC):
    """Interface of a sandbox backend.  Implementations must be usable from any event loop."""

    name = "backend"

    #: Whether ``open(limits, stateless=True)`` gives a handle whose every ``run`` starts from
    #: a fresh interpreter (and leaves nothing behind), so one handle serves many one-shot
    #: calls.  Backends without it get a new handle per stateless call.
    stateless_sessions = False

    @abc.abstractmethod
    async def open(self, limits: Limits, stateless: bool = False) -> Any:
        """A new interpreter handle (raise ``SandboxUnavailable`` if none can be started);
        ``stateless`` only matters where ``stateless_sessions`` is true."""

    @abc.abstractmethod
    async def run(self, handle: Any, code: str, limits: Limits) -> Execution:
        """Run one cell; never raises for anything the code did."""

    @abc.abstractmethod
    async def close(self, handle: Any) -> None:
        """End the interpreter and everything it started; never raises."""

    def describe(self) -> dict:
        """What the backend is and guarantees (shown in result metadata and logs)."""
        return {"backend": self.name}

    def shutdown(self) -> None:
        """Release process-wide resources; idempotent."""


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
        from tir_envs.tools.python.local import LocalBackend
        return LocalBackend(**options)
    if spec == "e2b":
        from tir_envs.tools.python.e2b import E2BBackend
        return E2BBackend(**options)
    if spec == "ray":
        from tir_envs.tools.python.ray_backend import RayBackend
        return RayBackend(**options)
    raise ValueError(f"backend must be 'local', 'e2b', 'ray' or a SandboxBackend instance, "
                     f"got {spec!r}")
