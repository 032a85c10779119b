"""The Ray backend: sandbox sessions served by Ray actors (``pip install 'tir-envs[ray]'``).

Each *sandbox host* is a named, async Ray actor that owns a local sandbox pool
(``LocalBackend``: the same pre-forked, isolated interpreters) on the node it runs on, and
serves sessions by id.  Every ``RayBackend`` with the same ``name`` and ``namespace`` attaches
to the same hosts (``get_if_exists``), so one pool serves many trainer processes, and hosts
spread over the cluster's machines serve them all.  Sessions are spread round-robin over
``num_hosts`` hosts.  A host that dies (node lost, actor killed) is recreated on the next
``open``; its sessions report ``infra_error``.

A host that is not ``detached`` belongs to the process that created it, and Ray ends it once
that process holds no handle on it, whoever else is attached (a handle found by name does not
count).  So each process keeps the handles of the hosts it reached until it exits
(``_HELD``): closing an env in one trainer process must not end the hosts serving the others'
open sessions (it did, and their calls came back ``infra_error``).
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from typing import Any

from tir_envs.tools.base import Status
from tir_envs.tools.python.backends.base import SandboxBackend, SandboxUnavailable
from tir_envs.tools.python.execution import Execution
from tir_envs.tools.python.limits import Limits
from tir_envs.validation import check_positive_int


#: (cluster, namespace, name) -> the handle this process keeps on that host (module doc)
_HELD: dict[tuple[str, str, str], Any] = {}
_HELD_LOCK = threading.Lock()


def _held(key: tuple[str, str, str], reach: Any) -> Any:
    """This process's handle on host ``key`` (``reach()`` finds or creates it once)."""
    with _HELD_LOCK:
        if key not in _HELD:
            _HELD[key] = reach()
        return _HELD[key]


def _release(key: tuple[str, str, str], actor: Any) -> None:
    """Forget a dead host's handle (the next ``_held`` finds or creates it anew)."""
    with _HELD_LOCK:
        if _HELD.get(key) is actor:
            del _HELD[key]


def _load_ray():
    try:
        import ray
    except ImportError as exc:
        raise ImportError("the ray backend needs Ray: pip install 'tir-envs[ray]'") from exc
    return ray


class SandboxHost:
    """The actor: a local sandbox pool and the sessions it serves (plain Python class, made a
    Ray actor by ``RayBackend``)."""

    def __init__(self, local_options: dict):
        from tir_envs.tools.python.backends.local import LocalBackend
        self.backend = LocalBackend(**local_options)
        self.sessions: dict[int, Any] = {}
        self.ids = itertools.count(1)

    async def open(self, limits: Limits) -> int:
        handle = await self.backend.open(limits)
        sid = next(self.ids)
        self.sessions[sid] = handle
        return sid

    async def run(self, sid: int, code: str, limits: Limits) -> dict:
        handle = self.sessions.get(sid)
        if handle is None:
            exe = Execution.infra("this sandbox session is unknown to its Ray host")
        else:
            exe = await self.backend.run(handle, code, limits)
        out = dataclasses.asdict(exe)
        out["status"] = exe.status.value
        return out

    async def close(self, sid: int) -> None:
        handle = self.sessions.pop(sid, None)
        if handle is not None:
            await self.backend.close(handle)

    async def info(self) -> dict:
        """Its pool state, and the Ray node it runs on (where a cluster placed it)."""
        import ray
        context = ray.get_runtime_context()
        return {"sessions": len(self.sessions), "node": context.get_node_id(),
                "actor": context.get_actor_id(), **self.backend.pool.info()}


class RayBackend(SandboxBackend):
    """Sessions on sandbox-host actors.

    ``address``: the Ray cluster (``None``: the one this process is connected to, or a new
    local one); ``num_hosts``: host actors to spread sessions over; ``name``/``namespace``:
    how hosts are found (same values = same hosts, across processes); ``detached``: hosts
    outlive the process that created them; ``actor_options``: extra ``.options()`` (resources,
    scheduling); ``local_options``: the hosts' ``LocalBackend`` settings (``isolation``,
    ``spares``, ...).
    """

    name = "ray"

    def __init__(self, address: str | None = None, num_hosts: int = 1,
                 name: str = "tir-python-sandbox", namespace: str = "tir_envs",
                 detached: bool = False, actor_options: dict | None = None,
                 init_options: dict | None = None, **local_options: Any):
        check_positive_int(num_hosts=num_hosts)
        self.ray = _load_ray()
        if not self.ray.is_initialized():
            self.ray.init(address=address, namespace=namespace, **(init_options or {}))
        self.num_hosts, self.base_name, self.namespace = num_hosts, name, namespace
        self.local_options = local_options
        self.actor_options = {"num_cpus": 0, "max_concurrency": 10_000, "max_restarts": 0,
                              **({"lifetime": "detached"} if detached else {}),
                              **(actor_options or {})}
        self._actor_class = self.ray.remote(SandboxHost)
        self._hosts: list[Any] = [None] * num_hosts
        self._next = itertools.count()
        self._lock = threading.Lock()

    def _key(self, index: int) -> tuple[str, str, str]:
        """Host ``index`` as ``_HELD`` knows it: in this cluster (a handle on a cluster this
        process left is worth nothing in the next), namespace and name."""
        cluster = self.ray.get_runtime_context().gcs_address or ""
        return cluster, self.namespace, f"{self.base_name}-{index}"

    def host(self, index: int):
        """The actor of host ``index`` (found by name, or created; kept: module doc)."""
        key = self._key(index)
        with self._lock:
            if self._hosts[index] is None:
                self._hosts[index] = _held(key, lambda: self._actor_class.options(
                    name=key[2], namespace=self.namespace, get_if_exists=True,
                    **self.actor_options).remote(self.local_options))
            return self._hosts[index]

    def _forget(self, index: int, actor: Any) -> None:
        with self._lock:
            if self._hosts[index] is actor:
                self._hosts[index] = None
        _release(self._key(index), actor)

    async def open(self, limits: Limits) -> tuple[int, Any, int]:
        index = next(self._next) % self.num_hosts
        for attempt in range(2):  # a dead host is replaced once
            actor = self.host(index)
            try:
                return index, actor, await actor.open.remote(limits)
            except self.ray.exceptions.RayActorError as e:
                self._forget(index, actor)
                if attempt:
                    raise SandboxUnavailable(f"Ray sandbox host {index} is down: {e}") from e
            except Exception as e:  # noqa: BLE001 - the host could not start a session
                raise SandboxUnavailable(f"Ray sandbox host {index}: {type(e).__name__}: {e}") from e
        raise AssertionError("unreachable")

    async def run(self, handle: tuple[int, Any, int], code: str, limits: Limits) -> Execution:
        index, actor, sid = handle
        try:
            out = await actor.run.remote(sid, code, limits)
        except self.ray.exceptions.RayError as e:
            self._forget(index, actor)
            return Execution.infra(f"the Ray sandbox host failed ({type(e).__name__})")
        out["status"] = Status(out["status"])
        return Execution(**out)

    async def close(self, handle: tuple[int, Any, int]) -> None:
        index, actor, sid = handle
        try:
            await actor.close.remote(sid)
        except Exception:  # noqa: BLE001 - a dead host has no session left to close
            pass

    async def info(self) -> list[dict]:
        """Every host's pool state (sessions, spares, isolation)."""
        return [await self.host(i).info.remote() for i in range(self.num_hosts)]

    def describe(self) -> dict:
        return {"backend": self.name, "hosts": self.num_hosts}
