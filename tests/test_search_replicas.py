"""Retrieval past one machine: replicas of one index on a two-node Ray cluster (two raylets on
this machine, as ``ray start`` on two machines would make), clients spreading their searches
over them; and the spreading client itself over plain servers, with one of them down."""

from __future__ import annotations

import pytest

from tests.search_helpers import hotpotqa_corpus
from tir_envs.data.qa import load_qa
from tir_envs.tools.search import build_index, open_retriever
from tir_envs.tools.search.retriever import RetrieverError
from tir_envs.tools.search.server import RetrievalServer
from tir_envs.tools.search.spread import SpreadRetriever

K = 5


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return build_index(hotpotqa_corpus(), tmp_path_factory.mktemp("rep") / "bm25",
                       backend="bm25")


@pytest.fixture(scope="module")
def queries():
    return [t.question for t in load_qa("hotpotqa_distractor")[:40]]


@pytest.fixture(scope="module")
def expected(index, queries):
    with open_retriever(index) as local:
        return local.batch_search(queries, K)


def _ids(results):
    return [[(h.docid, round(h.score, 4)) for h in hits] for hits in results]


def test_a_spread_client_equals_one_process_and_survives_a_replica_down(index, queries,
                                                                       expected):
    with RetrievalServer(index) as a, RetrievalServer(index) as b:
        client = open_retriever(f"{a.url},{b.url}")
        assert isinstance(client, SpreadRetriever) and client.num_docs == 10785
        got = [client.search(q, K) for q in queries]
        assert _ids(got) == _ids(expected)
        assert all(n >= len(queries) // 2 - 1 for n in client.answered)  # both used
        served = [a.health()["served"], b.health()["served"]]
        assert sum(served) == len(queries) and min(served) > 0
        b.stop()  # one replica gone: the other answers every search
        assert _ids([client.search(q, K) for q in queries]) == _ids(expected)
        from tir_envs.tools.search.backends import describe_index
        assert describe_index(f"{b.url},{a.url}")["num_docs"] == 10785  # the live one says
        a.stop()
        with pytest.raises(RetrieverError, match="unreachable"):
            client.search(queries[0], K)


def test_a_two_node_ray_cluster_serves_the_single_process_results(index, queries, expected,
                                                                  qwen_tok):
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    from tir_envs.envs.search import SearchEnv
    from tir_envs.tools.search.replicas import RetrievalReplicas

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1,
                                                            "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        with RetrievalReplicas(index, replicas=2, num_cpus=1) as replicas:
            assert {p["node_id"] for p in replicas.placed} == nodes  # one on each node
            client = replicas.retriever()
            got = [client.search(q, K) for q in queries]
            assert _ids(got) == _ids(expected)
            served = [h["served"] for h in replicas.health()]
            assert sum(served) == len(queries) and min(served) > 0
            # a search env given the replicas as its index spreads over them too
            env = SearchEnv(tokenizer=qwen_tok, index=replicas.url, tasks="hotpotqa_distractor")
            env.reset(seed=0)
            env.step(f"<search>{queries[0]}</search>")
            result = env.trajectory.turns[0].tool_results[0]
            assert result["status"] == "ok"
            assert result["docids"] == [h.docid for h in expected[0][:3]]
            env.close()
        _serve_replicas_command(cluster.address, index, queries, expected)
    finally:
        ray.shutdown()
        cluster.shutdown()


def _serve_replicas_command(address, index, queries, expected):
    """``tir-envs serve retrieval --replicas 2 --ray ADDRESS``: prints the replicas' URLs,
    which answer as one process does, and stops them on SIGTERM."""
    import subprocess
    import sys
    import time

    cmd = [sys.executable, "-m", "tir_envs.tools.search.server", "--index", str(index),
           "--replicas", "2", "--ray", address, "--port", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline()
        assert "2 replicas at http://" in line, line
        urls = line.strip().rsplit(" at ", 1)[1]
        assert len(urls.split(",")) == 2
        with open_retriever(urls) as client:
            assert _ids([client.search(q, K) for q in queries[:10]]) == _ids(expected[:10])
    finally:
        proc.terminate()
        assert proc.wait(60) == 0
    deadline = time.monotonic() + 30  # the replicas stop with the command (Ray may be slow)
    while True:
        try:
            open_retriever(urls.split(",")[0]).search(queries[0], K)
        except RetrieverError:
            break
        assert time.monotonic() < deadline, "a replica still answers 30 s after the command"
        time.sleep(0.2)
