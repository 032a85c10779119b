"""Retrieval past one machine: replicas of one index served on a Ray cluster's nodes.

Each replica is a Ray actor that starts a retrieval server (``server.RetrievalServer``: the
same process, protocol, back-pressure and ``--workers`` as on one machine) bound to its node's
address; the actors are placed one per node, in turn over the nodes that have the CPUs asked
for, before a node gets a second.  Clients anywhere on the cluster search through
``SpreadRetriever`` over the replicas' URLs (``RetrievalReplicas.url``: the comma-separated
list a search env's ``index=`` takes), so the load spreads over the nodes::

    with RetrievalReplicas("/shared/wiki18-bm25", replicas=4, address="auto") as replicas:
        env = gym.make("tir/Search-v0", index=replicas.url)

The index folder must be readable at the same path on every node (a shared filesystem, or a
copy on each).  Ray is the ``ray`` extra; nothing here is imported without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tir_envs.tools.search import jvm
from tir_envs.tools.search.spread import SpreadRetriever

if TYPE_CHECKING:
    import argparse


def _ray():
    try:
        import ray
    except ImportError:
        raise ImportError("retrieval replicas on a cluster need Ray: pip install "
                          "'tir-envs[ray]'") from None
    return ray


class ReplicaHost:
    """The body of one replica actor: a retrieval server on this node (Ray wraps the class)."""

    def __init__(self, index: str, options: dict[str, Any]):
        from tir_envs.tools.search.server_process import RetrievalServer
        ray = _ray()
        self.node_id = ray.get_runtime_context().get_node_id()
        self.server = RetrievalServer(index, host=ray.util.get_node_ip_address(),
                                      **options).start()

    def where(self) -> dict[str, Any]:
        return {"url": self.server.url, "node_id": self.node_id}

    def health(self) -> dict[str, Any]:
        return self.server.health()

    def stop(self) -> None:
        self.server.stop()


class RetrievalReplicas:
    """``replicas`` retrieval servers of ``index`` on a Ray cluster (module docstring).

    ``address``: the cluster to join (``auto``, ``ray://host:10001``; ``None``: the running
    Ray instance, else a local one); ``num_cpus``: CPUs each replica reserves on its node;
    ``server_options``: ``RetrievalServer`` settings (``workers``, ``mmap``, ``threads``,
    ``max_pending``, ``topk``...).
    """

    def __init__(self, index: str | Path, replicas: int = 2, address: str | None = None,
                 num_cpus: float = 1, **server_options: Any):
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
            raise ValueError(f"replicas must be a positive integer, got {replicas!r}")
        self.index = str(Path(index).resolve())
        self.replicas, self.address, self.num_cpus = replicas, address, num_cpus
        self.server_options = server_options
        self.actors: list[Any] = []
        self.placed: list[dict[str, Any]] = []

    def start(self) -> "RetrievalReplicas":
        ray = _ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        if not ray.is_initialized():
            ray.init(address=self.address, log_to_driver=False)
            jvm.keep_signal_handlers()  # ray.init replaced them (see jvm's docstring)
        nodes = self._nodes()
        host = ray.remote(ReplicaHost)
        try:
            for i in range(self.replicas):
                strategy = NodeAffinitySchedulingStrategy(nodes[i % len(nodes)], soft=False)
                self.actors.append(host.options(num_cpus=self.num_cpus,
                                                scheduling_strategy=strategy)
                                   .remote(self.index, self.server_options))
            self.placed = ray.get([a.where.remote() for a in self.actors])
        except Exception:
            self.stop()
            raise
        return self

    def _nodes(self) -> list[str]:
        """The alive nodes with ``num_cpus`` CPUs, in a stable order."""
        ray = _ray()
        nodes = sorted(n["NodeID"] for n in ray.nodes()
                       if n["Alive"] and n["Resources"].get("CPU", 0) >= self.num_cpus)
        if not nodes:
            raise RuntimeError(f"no node of the Ray cluster has {self.num_cpus} CPU(s) free for "
                               "a retrieval replica; pass a smaller num_cpus or add nodes")
        return nodes

    @property
    def urls(self) -> list[str]:
        return [p["url"] for p in self.placed]

    @property
    def url(self) -> str:
        """The replicas' URLs, comma-separated: what ``index=`` / ``open_retriever`` take."""
        return ",".join(self.urls)

    def retriever(self, timeout_s: float = 30.0) -> SpreadRetriever:
        """A client spreading searches over the replicas."""
        return SpreadRetriever(self.urls, timeout_s=timeout_s)

    def health(self) -> list[dict[str, Any]]:
        """Each replica's ``/health`` (its counters: ``served``, ``rejected``, ``pending``)."""
        return _ray().get([a.health.remote() for a in self.actors])

    def stop(self) -> None:
        """Stop every replica's server and actor.  Idempotent."""
        ray = _ray()
        actors, self.actors, self.placed = self.actors, [], []
        for actor in actors:
            try:
                ray.get(actor.stop.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - a dead actor took its server with it
                pass
            ray.kill(actor)

    def __enter__(self) -> "RetrievalReplicas":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def run_replicas(args: "argparse.Namespace") -> int:
    """``--replicas N``: the index served from N Ray actors (``replicas.py``) until a signal."""
    import os
    import signal
    import time

    stop: list[int] = []
    options = {"topk": args.topk, "threads": args.threads, "max_pending": args.max_pending,
               "batching": args.batching, "workers": args.workers, "mmap": args.mmap}
    with RetrievalReplicas(args.index, args.replicas, address=args.ray,
                           num_cpus=args.replica_cpus, **options) as replicas:
        for sig in (signal.SIGTERM, signal.SIGINT):  # after ray.init, which sets its own
            signal.signal(sig, lambda *_: stop.append(1))
        print(f"retrieval server: {args.replicas} replicas at {replicas.url}", flush=True)
        if args.ready_file:
            Path(f"{args.ready_file}.tmp").write_text(replicas.url)
            os.replace(f"{args.ready_file}.tmp", args.ready_file)
        while not stop:
            time.sleep(0.2)
    return 0
