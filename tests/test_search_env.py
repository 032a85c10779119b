"""``tir/Search-v0`` on the real HotpotQA Lucene index with the real Qwen2.5 tokenizer:
the Search-R1 protocol, an exact token ledger, budgets, and failures as observations."""


import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import tir_envs
from tests.fixtures.episodes import assert_interleaved, play
from tests.search_helpers import cache_env, hotpotqa_index, small_index
from tir_envs.env import EXHAUSTED_NOTICE
from tir_envs.envs.search import SearchEnv
from tir_envs.rollout import ScriptedPolicy, collect
from tir_envs.tools.search import open_retriever
from tir_envs.protocols.search_r1 import INVALID_ACTION_NOTICE, SEARCH_R1_TEMPLATE
from tir_envs.rewards.qa import QAReward
from tir_envs.tools.search.retriever import Retriever, RetrieverError

QUESTION = "Between Harvey Pekar and Denise Levertov who was born earlier?"
ACTIONS = [
    "<think>I need both birth dates.</think>\n<search> Harvey Pekar born </search>",
    "<think>Pekar: 1939. Now Levertov.</think>\n<search>Denise Levertov poet</search>",
    "<think>Levertov: 1923, so she is older.</think>\n<answer> Denise Levertov </answer>",
]


@pytest.fixture(scope="module")
def hotpot():
    return open_retriever(hotpotqa_index("lucene"))


@pytest.fixture
def env(qwen_tok, hotpot):
    e = SearchEnv(tokenizer=qwen_tok, retriever=hotpot)
    yield e
    e.close()


def expected_observation(hits):
    """Search-R1's rendering, written out independently of the package's formatter."""
    docs = ""
    for i, hit in enumerate(hits, 1):
        lines = hit.contents.split("\n")
        docs += f"Doc {i}(Title: {lines[0]}) " + "\n".join(lines[1:]) + "\n"
    return f"\n\n<information>{docs.strip()}</information>\n\n"


def test_scripted_episode_searches_twice_and_answers_with_exact_ledger(env, hotpot, qwen_tok):
    policy = ScriptedPolicy(ACTIONS, tokenizer=qwen_tok, logprob=-0.5)
    obs, info = env.reset(options={"index": 0})
    assert env.task.question == QUESTION and env.task.answer == ["Denise Levertov"]
    prompt = ("<|im_start|>user\n" + SEARCH_R1_TEMPLATE.format(question=QUESTION)
              + "<|im_end|>\n<|im_start|>assistant\n")
    assert obs["tokens"].tolist() == env.codec.encode(prompt)
    assert env.stop_sequences == ["</search>", "</answer>"]

    played = play(env, policy, obs["tokens"], 3, ACTIONS)
    actions, observations, rewards, info = (played.actions, played.observations,
                                            played.rewards, played.info)

    # the observations are exactly Search-R1's <information> blocks of the top-3 documents
    queries = ["Harvey Pekar born", "Denise Levertov poet"]
    for i, query in enumerate(queries):
        hits = hotpot.search(query, 3)
        assert observations[i] == env.codec.encode(expected_observation(hits))
    assert hotpot.search(queries[0], 3)[0].title == "Harvey Pekar"
    assert hotpot.search(queries[1], 3)[0].title == "Denise Levertov"
    assert observations[2] == []

    traj = info["trajectory"]
    assert traj.prompt_ids == env.codec.encode(prompt)
    assert_interleaved(traj, played)
    a, o = actions, observations
    assert traj.logprobs == [-0.5 if m else 0.0 for m in traj.loss_mask]
    assert traj.token_rewards[-1] == 1.0 and sum(traj.token_rewards) == 1.0
    assert rewards == [0.0, 0.0, 1.0] and traj.reward == 1.0
    assert traj.reward_components == {"em": 1.0, "f1": 1.0, "correct": 1.0, "has_answer": 1.0}
    assert traj.terminated and traj.stop_reason == "answered" and not traj.infra_failed
    spans, pos = [], 0
    for ids in (a[0], o[0], a[1], o[1], a[2]):
        spans.append((pos, pos + len(ids)))
        pos += len(ids)
    turns = traj.turns
    assert [t.action_span for t in turns] == [spans[0], spans[2], spans[4]]
    assert [t.observation_span for t in turns[:2]] == [spans[1], spans[3]]
    assert [t.tool_calls[0]["arguments"] for t in turns[:2]] == [{"query": q} for q in queries]
    assert turns[0].tool_results[0]["status"] == "ok"
    assert turns[0].tool_results[0]["docids"] == [h.docid for h in hotpot.search(queries[0], 3)]
    assert [t.status for t in turns] == ["ok", "ok", "no_call"]
    assert traj.text(qwen_tok) == prompt + "".join(
        act + env.codec.decode(obs) for act, obs in zip(ACTIONS, observations))


def test_wrong_answer_scores_zero_even_if_documents_hold_the_gold(env):
    env.reset(options={"index": 0})
    o, *_ = env.step(env.codec.encode("<search>Denise Levertov</search>"))
    assert "Denise Levertov" in env.codec.decode(o["tokens"])
    _, reward, term, _, info = env.step(env.codec.encode("<answer>Harvey Pekar</answer>"))
    assert term and reward == 0.0
    assert info["trajectory"].reward_components == {"em": 0.0, "f1": 0.0, "correct": 0.0, "has_answer": 1.0}


def test_f1_reward_and_answer_without_search(qwen_tok, hotpot):
    env = SearchEnv(tokenizer=qwen_tok, retriever=hotpot, metric="f1",
                    tasks=[{"question": "Who?", "answer": ["Denise Levertov"]}])
    env.reset(seed=0)
    _, reward, term, _, info = env.step(env.codec.encode("<answer>Levertov</answer>"))
    assert term and reward == pytest.approx(2 / 3)
    assert info["trajectory"].reward_components["em"] == 0.0


@pytest.mark.parametrize("gold, reward", [("Lyon", 1.0), ("Paris", 0.0)])
def test_one_answer_reading_reaches_the_ledger_and_the_reward(qwen_tok, hotpot, gold, reward):
    """The first tag decides that the action answers; the answer is the *last* ``<answer>``
    (Search-R1 grades the last), read once by the protocol, and that one reading is what the
    turn record, the trajectory and the reward all see."""
    graded = []

    def spy(task, trajectory, answer):
        graded.append(answer)
        return QAReward().score(task, trajectory, answer)

    env = SearchEnv(tokenizer=qwen_tok, retriever=hotpot, reward=spy,
                    tasks=[{"question": "Which city?", "answer": [gold]}])
    readings = []
    read = env.protocol.answer
    env.protocol.answer = lambda state: readings.append(read(state)) or readings[-1]
    env.reset(seed=0)
    _, value, term, _, info = env.step(env.codec.encode(
        "<answer>Paris</answer> no, wait: <answer>Lyon</answer>"))
    traj = info["trajectory"]
    assert term and readings == ["Lyon"] and graded == ["Lyon"]
    assert info["turn"].answer == traj.turns[-1].answer == traj.answer == "Lyon"
    assert value == traj.reward == reward and traj.correct is bool(reward)
    env.close()


def test_invalid_action_gets_search_r1_notice_and_episode_goes_on(env):
    env.reset(options={"index": 0})
    obs, reward, term, trunc, info = env.step(env.codec.encode("I think it is Denise."))
    assert env.codec.decode(obs["tokens"]) == INVALID_ACTION_NOTICE
    assert not term and not trunc and reward == 0.0
    assert info["turn"].status == "tool_error"
    _, reward, term, _, _ = env.step(env.codec.encode("<answer>Denise Levertov</answer>"))
    assert term and reward == 1.0


def test_first_tag_decides_and_hallucinated_information_is_ignored(env):
    env.reset(options={"index": 0})
    text = ("<search>Harvey Pekar</search><information>fake</information>"
            "<answer>wrong</answer>")
    obs, _, term, _, info = env.step(env.codec.encode(text))
    assert not term and "<information>Doc 1(Title:" in env.codec.decode(obs["tokens"])
    assert len(info["turn"].tool_calls) == 1
    obs, _, term, _, info = env.step(env.codec.encode(
        "<answer>Denise Levertov</answer><search>more</search>"))
    assert term and info["trajectory"].reward == 1.0 and len(obs["tokens"]) == 0


def test_max_turns_matches_search_r1_two_rounds_then_answer(env):
    env.reset(options={"index": 0})
    for _ in range(2):
        _, _, term, trunc, _ = env.step(env.codec.encode("<search>Harvey Pekar</search>"))
        assert not term and not trunc
    obs, reward, term, trunc, info = env.step(env.codec.encode("<search>again</search>"))
    assert trunc and not term and len(obs["tokens"]) == 0 and reward == 0.0
    traj = info["trajectory"]
    assert traj.stop_reason == "max_turns" and traj.reward_components["has_answer"] == 0.0
    assert "max_turns reached" in traj.turns[-1].notes[0]


def test_observation_cap_cuts_documents_but_keeps_the_tags(qwen_tok, hotpot):
    env = SearchEnv(tokenizer=qwen_tok, retriever=hotpot, max_obs_tokens=60, topk=5)
    env.reset(options={"index": 0})
    obs, *_, info = env.step(env.codec.encode("<search>Harvey Pekar born</search>"))
    text = env.codec.decode(obs["tokens"])
    assert len(obs["tokens"]) <= 60
    assert text.startswith("\n\n<information>Doc 1(Title: \"Harvey Pekar\")")
    assert text.endswith("</information>\n\n")
    assert any("search results cut" in n for n in info["turn"].notes)


def test_search_budget_exhaustion_notice(qwen_tok, hotpot):
    env = SearchEnv(tokenizer=qwen_tok, retriever=hotpot, max_tool_calls=1, max_turns=4)
    env.reset(options={"index": 0})
    first, *_ = env.step(env.codec.encode("<search>Harvey Pekar</search>"))
    obs, _, term, trunc, info = env.step(env.codec.encode("<search>Denise Levertov</search>"))
    text = env.codec.decode(obs["tokens"])
    assert text == f"\n\n<information>{EXHAUSTED_NOTICE}</information>\n\n"
    assert not term and not trunc and "tool budget exhausted" in info["turn"].notes


class DownRetriever(Retriever):
    backend = "down"

    @property
    def num_docs(self):
        return 0

    def search(self, query, k=3):
        raise RetrieverError("retrieval server http://127.0.0.1:9 is unreachable")


def test_retriever_failure_is_an_infra_error_observation(qwen_tok):
    env = SearchEnv(tokenizer=qwen_tok, retriever=DownRetriever())
    env.reset(options={"index": 0})
    obs, reward, term, trunc, info = env.step(env.codec.encode("<search>x</search>"))
    assert "not your fault" in env.codec.decode(obs["tokens"])
    assert info["turn"].status == "infra_error"
    _, _, _, _, info = env.step(env.codec.encode("<answer>x</answer>"))
    assert info["trajectory"].infra_failed


def test_empty_query_is_the_models_error(env):
    env.reset(options={"index": 0})
    obs, *_, info = env.step(env.codec.encode("<search>  </search>"))
    assert "query is empty" in env.codec.decode(obs["tokens"])
    assert info["turn"].status == "tool_error"


def test_async_episode_and_rollout_engine(qwen_tok):
    retriever = open_retriever(small_index("lucene"))
    tasks = [{"question": f"Which city is the capital of {c}?", "answer": a}
             for c, a in (("France", "Paris"), ("Germany", "Berlin"))]

    def script(context: str) -> str:
        france = "capital of France?" in context
        if "Doc 1(Title:" not in context:
            return f"<search>capital of {'France' if france else 'Germany'}</search>"
        return "<answer>" + ("Paris" if france else "Berlin") + "</answer>"

    runs = collect(lambda: SearchEnv(tokenizer=qwen_tok, retriever=retriever, tasks=tasks),
                   ScriptedPolicy(script, tokenizer=qwen_tok), tasks=None, samples_per_task=2,
                   progress=False)
    assert len(runs) == 4 and all(t.reward == 1.0 for t in runs)
    assert all(t.num_tool_calls == 1 and t.turns[0].tool_results[0]["docids"][0] in
               ("paris", "berlin") for t in runs)


def test_defaults_need_no_arguments_and_build_the_hotpotqa_index(monkeypatch):
    hotpotqa_index("lucene")  # the cache the default env finds (built once for all tests)
    with cache_env():
        env = gym.make("tir/Search-v0")
        check_env(env.unwrapped, skip_render_check=True)
        base = env.unwrapped
        assert len(base.tasks) == 1100 and base.max_turns == 3 and base.max_obs_tokens == 500
        assert base.search_tool.topk == 3
        obs, _ = env.reset(seed=3)
        obs, *_ = env.step(base.codec.encode("<search>Harvey Pekar</search>"))
        assert "Harvey Pekar" in base.codec.decode(obs["tokens"])
        assert base.search_tool.retriever.backend == "lucene"
        env.close()


def test_no_java_backend_for_the_default_index(qwen_tok):
    with cache_env():
        env = SearchEnv(tokenizer=qwen_tok, search_backend="bm25")
        env.reset(options={"index": 0})
        obs, *_ = env.step(env.codec.encode("<search>Harvey Pekar American Splendor</search>"))
        assert env.search_tool.retriever.backend == "bm25"
        assert '(Title: "Harvey Pekar")' in env.codec.decode(obs["tokens"])


def test_bad_arguments_are_named(qwen_tok):
    with pytest.raises(ValueError, match="metric"):
        SearchEnv(tokenizer=qwen_tok, retriever=DownRetriever(), metric="acc")
    with pytest.raises(ValueError, match="retriever="):
        SearchEnv(tokenizer=qwen_tok, retriever=DownRetriever(), tool_format="json")
    with pytest.raises(ValueError, match="question"):
        SearchEnv(tokenizer=qwen_tok, retriever=DownRetriever(), prompt_template="no slot")
    with pytest.raises(TypeError, match="accepts"):
        tir_envs.make("tir/Search-v0", top_k=3)


def test_results_as_a_chat_message_stay_within_the_cap(qwen_tok, hotpot):
    env = SearchEnv(tokenizer=qwen_tok, retriever=hotpot, observation_role="user",
                    max_obs_tokens=80)
    env.reset(options={"index": 0})
    obs, *_ = env.step(env.codec.encode("<search>Harvey Pekar born</search>"))
    text = env.codec.decode(obs["tokens"])
    assert text.startswith("<|im_end|>\n<|im_start|>user\n\n\n<information>Doc 1(Title:")
    assert text.endswith("</information>\n\n<|im_end|>\n<|im_start|>assistant\n")
    assert len(obs["tokens"]) <= 80


@pytest.mark.parametrize("old, name", [("nq_open", "nq"), ("2wiki_500", "2wiki"),
                                       ("musique_500", "musique")])
def test_tasks_take_the_bench_suites_names_and_the_old_ones(qwen_tok, old, name):
    """``tasks="nq"`` is what ``tir-envs bench --suite nq`` runs; ``tasks="nq_open"`` is the
    same set under the same name."""
    new_env = SearchEnv(tokenizer=qwen_tok, retriever=DownRetriever(), tasks=name)
    old_env = SearchEnv(tokenizer=qwen_tok, retriever=DownRetriever(), tasks=old)
    assert [t.id for t in old_env.tasks] == [t.id for t in new_env.tasks]
    assert {t.meta["dataset"] for t in old_env.tasks} == {name}


@pytest.mark.parametrize("env_id", ["tir/Search-v0", "tir/AutoTIR-v0"])
def test_the_missing_index_error_names_a_command_that_builds_it(env_id, qwen_tok, tmp_path,
                                                                 monkeypatch):
    """Paste the command from the error (after writing its corpus file): the index it builds
    is the one the env then opens."""
    import json
    import re
    import shlex

    from tir_envs.cli import main
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as err:
        tir_envs.make(env_id, tokenizer=qwen_tok, retriever="idx", search_backend="bm25")
    command = re.search(r"`(tir-envs index build [^`]*)`", str(err.value)).group(1)
    argv = shlex.split(command)
    corpus = argv[argv.index("--corpus") + 1]
    (tmp_path / corpus).write_text(
        json.dumps({"id": "d1", "title": "Paris", "text": "Paris is the capital of France."})
        + "\n" + json.dumps({"id": "d2", "title": "Berlin", "text": "Berlin is in Germany."})
        + "\n")
    assert main(argv[1:]) == 0
    env = tir_envs.make(env_id, tokenizer=qwen_tok, retriever="idx",
                        tasks=[{"question": "capital of France?", "answer": "Paris",
                                "meta": {"domain": "knowledge", "tool": "search"}}])
    tool = env.unwrapped.tools["search"]
    hits = tool.retriever.search("capital of France", 1)
    assert [h.docid for h in hits] == ["d1"]
    env.close()


def test_a_relative_lucene_index_opens_after_a_chdir(tmp_path, monkeypatch):
    """The in-process JVM keeps the directory it started in: a relative index path is
    resolved by Python first, so it means what it means to the caller."""
    open_retriever(hotpotqa_index("lucene"))  # the JVM starts (if no test started it) here
    from tir_envs.cli import main
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.jsonl").write_text('{"id": "d1", "contents": "Paris is in France."}\n')
    assert main(["index", "build", "--corpus", "c.jsonl", "--out", "rel", "--backend",
                 "lucene"]) == 0
    assert [h.docid for h in open_retriever("rel").search("Paris", 1)] == ["d1"]
