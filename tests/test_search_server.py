"""The retrieval server (a real subprocess on 127.0.0.1 serving a real Lucene index), its HTTP
client backend, and the ``tir-envs index`` / ``serve`` commands."""

import asyncio
import json
import urllib.error
import urllib.request

import pytest

from tests.search_helpers import SMALL_QUERIES, small_corpus, small_index
from tir_envs.cli import build_parser, main
from tir_envs.envs.search import SearchEnv
from tir_envs.tools.base import Status
from tir_envs.tools.search import SearchTool, open_retriever
from tir_envs.tools.search.client import HttpRetriever
from tir_envs.tools.search.retriever import RetrieverError
from tir_envs.tools.search.server import RetrievalServer


@pytest.fixture(scope="module")
def server():
    with RetrievalServer(small_index("lucene"), topk=3) as s:
        yield s


@pytest.fixture(scope="module")
def local():
    return open_retriever(small_index("lucene"))


def post(url, payload):
    req = urllib.request.Request(url + "/retrieve", data=json.dumps(payload).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def test_server_is_loopback_and_describes_its_index(server):
    assert server.url.startswith("http://127.0.0.1:")
    health = server.health()
    assert health["status"] == "ok" and health["backend"] == "lucene" and health["num_docs"] == 8


def test_client_returns_what_the_index_returns(server, local):
    client = HttpRetriever(server.url)
    queries = list(SMALL_QUERIES) + ["river"]
    assert client.batch_search(queries, k=3) == local.batch_search(queries, k=3)
    for q in queries:
        assert client.search(q, 2) == local.search(q, 2)
    assert client.num_docs == 8
    many = [f"capital {i}" for i in range(300)]
    assert len(client.batch_search(many, 1)) == 300


def test_search_r1_protocol(server):
    answer = post(server.url, {"queries": ["capital of France"], "topk": 2,
                               "return_scores": False})
    assert list(answer) == ["result"] and len(answer["result"][0]) == 2
    first = answer["result"][0][0]
    assert first == {"document": {"id": "paris", "contents": first["document"]["contents"]}}
    scored = post(server.url, {"query": "capital river"})["result"][0]
    assert len(scored) == 3 and scored[0]["score"] > scored[1]["score"]


@pytest.mark.parametrize("payload, message", [
    ({"queries": "not a list"}, "list of strings"),
    ({"queries": ["a"], "topk": 0}, "positive integer"),
    ([1, 2], "JSON object"),
])
def test_bad_requests_get_400_with_reason(server, payload, message):
    with pytest.raises(urllib.error.HTTPError) as err:
        post(server.url, payload)
    assert err.value.code == 400 and message in json.loads(err.value.read())["error"]


def test_many_concurrent_async_searches(server, local):
    client = HttpRetriever(server.url)

    async def run():
        return await asyncio.gather(*[client.asearch(q, 3) for q in list(SMALL_QUERIES) * 10])

    results = asyncio.run(run())
    assert results == [local.search(q, 3) for q in list(SMALL_QUERIES) * 10]


def test_env_over_the_server(server, qwen_tok):
    env = SearchEnv(tokenizer=qwen_tok, retriever=server.url,
                    tasks=[{"question": "Who wrote Hamlet", "answer": "William Shakespeare"}])
    env.reset(seed=0)
    obs, *_ = env.step(env.codec.encode("<search>tragedy Hamlet author</search>"))
    assert '(Title: "Hamlet") Hamlet is a tragedy' in env.codec.decode(obs["tokens"])
    _, reward, *_ = env.step(env.codec.encode("<answer>William Shakespeare</answer>"))
    assert reward == 1.0


def test_stopped_server_is_an_infrastructure_error():
    with RetrievalServer(small_index("bm25")) as s:
        url = s.url
        assert HttpRetriever(url).search("capital of France", 1)[0].docid == "paris"
    client = HttpRetriever(url, timeout_s=5)
    with pytest.raises(RetrieverError, match="unreachable"):
        client.search("x")
    result = asyncio.run(SearchTool(client).call({"query": "x"}))
    assert result.status == Status.INFRA_ERROR and "not your fault" in result.text


def test_server_start_failure_shows_the_log(tmp_path):
    with pytest.raises(RuntimeError, match="neither an index"):
        RetrievalServer(tmp_path).start()


def test_client_rejects_bad_urls():
    with pytest.raises(ValueError, match="http://host:port"):
        HttpRetriever("127.0.0.1:8000")


def test_index_and_serve_commands(tmp_path, capsys):
    out = tmp_path / "idx"
    assert main(["index", "build", "--corpus", str(small_corpus()), "--out", str(out),
                 "--backend", "bm25"]) == 0
    built = json.loads(capsys.readouterr().out)
    assert built["backend"] == "bm25" and built["num_docs"] == 8
    assert main(["index", "search", "--index", str(out), "-k", "1", "highest", "mountain"]) == 0
    assert capsys.readouterr().out.startswith('Doc 1(Title: "Mount Everest")')
    # an existing index is refused with one line on stderr (the CLI's errors), exit 1
    assert main(["index", "build", "--corpus", str(small_corpus()), "--out", str(out),
                 "--backend", "bm25"]) == 1
    assert "FileExistsError" in capsys.readouterr().err
    corpus = tmp_path / "hotpot.jsonl"
    assert main(["index", "corpus", "--out", str(corpus)]) == 0
    assert sum(1 for _ in corpus.open()) == 10_785
    args = build_parser().parse_args(["serve", "retrieval", "--index", str(out)])
    assert args.host == "127.0.0.1" and args.port == 8000 and args.topk == 3
