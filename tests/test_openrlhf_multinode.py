"""OpenRLHF's multi-node path, as far as one machine allows: a Ray cluster of two nodes (two
raylets started by ``ray.cluster_utils.Cluster``, as ``ray start --head`` and ``ray start
--address`` would on two machines), the adapter's env settings given once in the job's runtime
env, and the Python sandbox's host actors spread over the nodes by the adapter's settings.

What it cannot check here: GPUs, NCCL between machines, and OpenRLHF's own launch (its CLI
imports vLLM and DeepSpeed, which need CUDA); docs/openrlhf.md gives the full recipe."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "tir_envs_multinode"
SETTINGS = {"protocol": "torl", "backend": {
    "name": "ray", "num_hosts": 2, "namespace": NAMESPACE, "spares": 0,
    "actor_options": {"resources": {"sandbox": 1}}}}


@pytest.fixture(scope="module")
def two_nodes():
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {"sandbox": 1}, "include_dashboard": False})
    cluster.add_node(num_cpus=1, resources={"sandbox": 1})
    cluster.wait_for_nodes()
    # what `ray job submit --runtime-env-json '{"env_vars": {...}}'` gives every worker
    ray.init(address=cluster.address, namespace=NAMESPACE, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO), "TIR_ENV_ID": "tir/MathCode-v0",
                                       "TIR_ENV_KWARGS": json.dumps(SETTINGS)}})
    yield cluster
    ray.shutdown()
    cluster.shutdown()


@ray.remote(num_cpus=0)
def adapter_episode(code: str) -> dict:
    """What an OpenRLHF worker does on its node: build the env from the environment variables
    alone (the adapter's ``EnvConfig.from_environ``) and run one tool call."""
    from tir_envs.trainers.common.env_config import EnvConfig

    env = EnvConfig.from_environ().make()
    try:
        out = {"node": ray.get_runtime_context().get_node_id(), "status": [], "observation": []}
        for _ in range(2):  # two episodes: the backend deals sessions to its hosts in turn
            env.reset(options={"task": {"question": "What is 6*7?", "answer": "42"}})
            obs, *_ = env.step(f"```python\n{code}\n```\n```output")
            out["status"].append(env.unwrapped.trajectory.turns[0].tool_results[0]["status"])
            out["observation"].append(env.unwrapped.codec.decode(obs["tokens"].tolist()))
        out["placed"] = sandbox_hosts()  # while the env holds them (closing may end them)
        return out
    finally:
        env.close()


def sandbox_hosts(namespace: str = NAMESPACE) -> dict[str, str]:
    """The sandbox host actors by name and the node each runs on, as each reports it (GCS's
    actor table, read from a task, once came back empty in a full run)."""
    hosts = {}
    for i in range(SETTINGS["backend"]["num_hosts"] + 1):  # one more: none may exist
        name = f"tir-python-sandbox-{i}"
        try:
            actor = ray.get_actor(name, namespace=namespace)
        except ValueError:  # no actor of that name
            continue
        hosts[name] = ray.get(actor.info.remote())["node"]
    return hosts


def test_env_settings_reach_every_node_and_sandbox_hosts_spread_over_them(two_nodes):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    assert len(nodes) == 2
    runs = ray.get([adapter_episode.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
        node, soft=False)).remote(f"print(6*7 + {i})") for i, node in enumerate(nodes)])
    assert {r["node"] for r in runs} == set(nodes)  # one episode on each node, from env vars
    assert [r["status"] for r in runs] == [["ok", "ok"], ["ok", "ok"]]
    assert all("42" in o for o in runs[0]["observation"])
    assert all("43" in o for o in runs[1]["observation"])
    # num_hosts=2 with one `sandbox` resource per node: one sandbox host actor on each node
    for placed in (r["placed"] for r in runs):
        assert sorted(placed) == ["tir-python-sandbox-0", "tir-python-sandbox-1"]
        assert set(placed.values()) == set(nodes)


@ray.remote(num_cpus=0)
class Trainer:
    """A long-lived trainer process holding its own env (as an OpenRLHF worker does)."""

    def __init__(self):
        import os

        from tir_envs.trainers.common.env_config import EnvConfig
        # hosts of this test's own, needing no `sandbox` resource (the first test's hosts,
        # kept by the processes that made them, hold both)
        settings = {**SETTINGS, "backend": {**SETTINGS["backend"], "namespace": OWN_HOSTS,
                                            "actor_options": {}}}
        os.environ["TIR_ENV_KWARGS"] = json.dumps(settings)
        self.env = EnvConfig.from_environ().make()

    def episodes(self, n: int) -> list[str]:
        statuses = []
        for _ in range(n):
            self.env.reset(options={"task": {"question": "What is 6*7?", "answer": "42"}})
            self.env.step("```python\nprint(6*7)\n```\n```output")
            statuses.append(self.env.unwrapped.trajectory.turns[0].tool_results[0]["status"])
        return statuses

    def close(self) -> None:
        import gc
        self.env.close()
        self.env = None
        gc.collect()  # the env's handles on the hosts are gone now


OWN_HOSTS = "tir_envs_multinode_shared"  # a namespace: hosts of that test's own


def host_ids() -> dict[str, str]:
    """Each sandbox host's actor id, as it reports it (a recreated host has a new one)."""
    return {name: ray.get(ray.get_actor(name, namespace=OWN_HOSTS).info.remote())["actor"]
            for name in sandbox_hosts(OWN_HOSTS)}


def test_hosts_outlive_the_env_that_created_them_while_another_process_uses_them(two_nodes):
    """The race behind the multi-node test's failures on a loaded machine: the process whose
    env created a sandbox host owned it, and closing that env dropped the last handle the
    owner counted, so Ray ended the host under every other process attached to it (their
    open sessions: ``infra_error``; their next ones on a new host).  A host now lives as long
    as a process that attached to it does."""
    first, second = Trainer.remote(), Trainer.remote()
    assert ray.get(first.episodes.remote(2)) == ["ok", "ok"]  # creates both hosts
    assert ray.get(second.episodes.remote(2)) == ["ok", "ok"]  # attaches to them
    before = host_ids()
    assert len(before) == 2
    ray.get(first.close.remote())
    time.sleep(2)  # Ray's owner-side release of an out-of-scope actor is asynchronous
    assert host_ids() == before  # the same hosts, not new ones
    assert ray.get(second.episodes.remote(2)) == ["ok", "ok"]
    ray.get(second.close.remote())
    for actor in (first, second):
        ray.kill(actor)
