"""``tir/SQL-v0`` with the real Qwen2.5 tokenizer on real Spider databases: the SkyRL-SQL
protocol, an exact token ledger, budgets, rewards, and an episode that tries to break out."""

from __future__ import annotations

import asyncio

import pytest
from gymnasium.utils.env_checker import check_env

import tir_envs
from tests.fixtures.episodes import assert_interleaved, play
from tests.sql_helpers import CACHE, sha256, spider_db
from tir_envs.data.spider import load_spider
from tir_envs.envs.sql import SQL_PROMPT_TEMPLATE, SQLEnv  # noqa: F401
from tir_envs.protocols.skyrl_sql import INVALID_ACTION
from tir_envs.rewards.sql import SQLReward
from tir_envs.rollout import ScriptedPolicy, collect
from tir_envs.task import Task
from tir_envs.tools.sql.schema import render_schema

PETS = {t.id: t for t in load_spider(["pets_1"])}
TASK = PETS["pets_1/0"]  # "Find the number of pets whose weight is heavier than 10."
ACTIONS = [
    "<think>Which tables are there?</think>\n<sql>SELECT PetID, weight FROM Pets ORDER BY PetID</sql>",
    "<think>I should count them.</think> Let me answer in words: two pets.",
    "<think>Two pets weigh more than 10.</think>\n"
    "<solution>SELECT count(*) FROM Pets WHERE weight > 10</solution>",
]
OBS_1 = ("\n\n<observation>PetID | weight\n--------------\n2001 | 12.0\n2002 | 13.4\n2003 | 9.3\n"
         "(3 rows)\n<reminder>You have 4 turns left to complete the task.</reminder>"
         "</observation>\n\n")
OBS_2 = (f"\n\n<observation>Error: {INVALID_ACTION}\n"
         "<reminder>You have 3 turns left to complete the task.</reminder></observation>\n\n")


@pytest.fixture
def env(qwen_tok):
    e = SQLEnv(tokenizer=qwen_tok, tasks=list(PETS.values()), cache_dir=CACHE)
    yield e
    e.close()


def test_question_and_protocol_facts(env):
    assert TASK.question == "Find the number of pets whose weight is heavier than 10."
    assert env.stop_sequences == ["</sql>", "</solution>"]
    assert env.max_turns == 5 and env.sql_tool.timeout_s == 5.0


def test_episode_exact_ledger(env, qwen_tok):
    policy = ScriptedPolicy(ACTIONS, tokenizer=qwen_tok, logprob=-0.25)
    obs, info = env.reset(options={"task": TASK})
    assert info["db_id"] == "pets_1"
    user = SQL_PROMPT_TEMPLATE.format(engine="SQLite", schema=render_schema(spider_db("pets_1")),
                                      question=TASK.question, max_turns=5, max_rows=50)
    prompt = "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n"
    assert obs["tokens"].tolist() == env.codec.encode(prompt)
    assert "CREATE TABLE Pets (" in user and "/* 3 example rows of Pets:" in user

    played = play(env, policy, obs["tokens"], 3, ACTIONS)
    actions, observations, rewards, info = (played.actions, played.observations,
                                            played.rewards, played.info)

    assert observations[0] == env.codec.encode(OBS_1)
    assert observations[1] == env.codec.encode(OBS_2)
    assert observations[2] == []
    traj = info["trajectory"]
    assert traj.prompt_ids == env.codec.encode(prompt)
    assert_interleaved(traj, played)
    a, o = actions, observations
    assert traj.logprobs == ([-0.25] * len(a[0]) + [0.0] * len(o[0]) + [-0.25] * len(a[1])
                             + [0.0] * len(o[1]) + [-0.25] * len(a[2]))
    assert traj.token_rewards[-1] == 1.0 and sum(traj.token_rewards) == 1.0
    assert rewards == [0.0, 0.0, 1.0] and traj.reward == 1.0
    assert not traj.retokenized and traj.drift == 0
    assert traj.reward_components == {"format": 1.0, "has_answer": 1.0, "executed": 1.0,
                                      "correct": 1.0, "timeout": 0.0, "gold_error": 0.0}
    assert [t.status for t in traj.turns] == ["ok", "tool_error", "no_call"]
    assert traj.turns[0].tool_calls[0]["arguments"] == {
        "query": "SELECT PetID, weight FROM Pets ORDER BY PetID"}
    assert traj.turns[0].tool_results[0]["sql_status"] == "ok"
    assert traj.stop_reason == "answered" and traj.terminated and not traj.truncated
    segments = traj.segments(qwen_tok)
    assert [kind for kind, _ in segments] == ["prompt", "action", "observation", "action",
                                              "observation", "action"]
    assert segments[2][1] == OBS_1


def test_wrong_answer_and_sql_error_score_zero(env):
    for solution, executed in (("SELECT count(*) FROM Pets", 1.0), ("SELECT nope", 0.0)):
        env.reset(options={"task": TASK})
        _, reward, term, _, info = env.step(f"<solution>{solution}</solution>")
        comps = info["trajectory"].reward_components
        assert term and reward == 0.0
        assert comps["format"] == 1.0 and comps["executed"] == executed and comps["correct"] == 0.0


def test_running_out_of_turns_is_a_format_failure(qwen_tok):
    env = SQLEnv(tokenizer=qwen_tok, tasks=[TASK], max_turns=2, cache_dir=CACHE)
    env.reset(options={"index": 0})
    obs, reward, term, trunc, _ = env.step("<sql>SELECT 1</sql>")
    assert env.codec.decode(obs["tokens"]).endswith(
        "(1 row)\n<reminder>You have 1 turns left to complete the task.</reminder>"
        "</observation>\n\n")
    obs, reward, term, trunc, info = env.step("<sql>SELECT 2</sql>")
    traj = info["trajectory"]
    assert trunc and not term and obs["tokens"].size == 0  # the last call is not executed
    assert reward == -1.0 and traj.reward_components["format"] == 0.0
    assert traj.stop_reason == "max_turns"
    env.close()


@pytest.mark.parametrize("engine", ["sqlite", "duckdb"])
def test_an_episode_cannot_touch_the_database(engine, qwen_tok):
    env = SQLEnv(tokenizer=qwen_tok, tasks=[TASK], cache_dir=CACHE, engine=engine)
    db = spider_db("pets_1")
    before = sha256(db.sqlite_path), sha256(db.duckdb_path)
    env.reset(options={"task": TASK})
    attacks = ["<sql>DROP TABLE Pets</sql>", "<sql>SELECT * FROM read_csv('/etc/passwd')</sql>",
               "<sql>COPY Pets TO '/tmp/tir_sql_env_attack.csv'</sql>"]
    texts = []
    for attack in attacks:
        obs, *_ = env.step(attack)
        texts.append(env.codec.decode(obs["tokens"]))
    assert "statement refused: DROP statements are not allowed" in texts[0]
    # DuckDB refuses file access; SQLite has no table function of that name
    assert ("Permission Error" if engine == "duckdb" else "no such table: read_csv") in texts[1]
    copy = "statement refused: COPY statements are not allowed" if engine == "duckdb" else \
        'near "COPY": syntax error'  # SQLite has no COPY
    assert copy in texts[2]
    _, reward, *_ = env.step("<solution>SELECT count(*) FROM Pets WHERE weight > 10</solution>")
    assert reward == 1.0
    assert (sha256(db.sqlite_path), sha256(db.duckdb_path)) == before


def test_a_broken_gold_flags_the_trajectory(env):
    bad = Task("pets_1/bad", "q", "SELECT nope FROM Pets", dict(TASK.meta))
    env.reset(options={"task": bad})
    _, reward, _, _, info = env.step("<solution>SELECT 1</solution>")
    traj = info["trajectory"]
    assert reward == 0.0 and traj.infra_failed and traj.reward_components["gold_error"] == 1.0


def test_async_twins_and_observation_role(qwen_tok):
    env = SQLEnv(tokenizer=qwen_tok, tasks=[TASK], cache_dir=CACHE, observation_role="user")

    async def episode():
        await env.areset(options={"index": 0})
        obs, *_ = await env.astep("<sql>SELECT count(*) AS n FROM Pets</sql><|im_end|>")
        last = await env.astep("<solution>SELECT count(*) FROM Pets WHERE weight > 10</solution>")
        return env.codec.decode(obs["tokens"]), last

    text, (_, reward, term, _, _) = asyncio.run(episode())
    assert text.startswith("\n<|im_start|>user\n\n\n<observation>n\n-\n3\n(1 row)\n")
    assert text.endswith("</observation>\n\n<|im_end|>\n<|im_start|>assistant\n")
    assert term and reward == 1.0
    env.close()


def test_astep_scores_a_slow_solution_off_the_event_loop(qwen_tok):
    env = SQLEnv(tokenizer=qwen_tok, tasks=[TASK], cache_dir=CACHE,
                 reward=SQLReward(timeout_s=1.0))
    slow = ("<solution>WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
            "SELECT count(*) FROM c</solution>")

    async def main():
        await env.areset(options={"index": 0})
        ticks = 0
        step = asyncio.ensure_future(env.astep(slow))
        while not step.done():
            await asyncio.sleep(0.05)
            ticks += 1
        return ticks, step.result()

    ticks, (_, reward, term, _, info) = asyncio.run(main())
    assert ticks >= 5  # the loop kept running while the prediction timed out
    assert term and reward == 0.0 and info["trajectory"].reward_components["timeout"] == 1.0
    env.close()


def test_rollout_engine_drives_the_env(qwen_tok):
    policy = ScriptedPolicy(["<sql>SELECT count(*) FROM Pets WHERE weight > 10</sql>",
                             "<solution>SELECT count(*) FROM Pets WHERE weight > 10</solution>"],
                            tokenizer=qwen_tok)
    out = collect(lambda: SQLEnv(tokenizer=qwen_tok, cache_dir=CACHE), policy, [TASK],
                  samples_per_task=2, progress=False)
    assert [t.reward for t in out] == [1.0, 1.0]
    assert all(t.num_tool_calls == 1 and not t.infra_failed for t in out)


def test_make_with_no_arguments_uses_the_shipped_data(monkeypatch):
    monkeypatch.setenv("TIR_ENVS_CACHE_DIR", str(CACHE))
    env = tir_envs.make("tir/SQL-v0")
    inner = env.unwrapped
    assert len(inner.tasks) == 972 and inner.tokenizer is not None
    obs, info = env.reset(seed=3)
    assert obs["tokens"].size > 100 and info["db_id"]
    check_env(inner, skip_render_check=True)
    env.close()


def test_bad_arguments_say_how_to_fix(qwen_tok):
    with pytest.raises(ValueError, match=r"prompt_template must contain \{schema\}"):
        SQLEnv(tokenizer=qwen_tok, tasks=[TASK], prompt_template="{question}")
    with pytest.raises(ValueError, match="own sql tool"):
        SQLEnv(tokenizer=qwen_tok, tasks=[TASK], tool_format="json")
    env = SQLEnv(tokenizer=qwen_tok, tasks=[Task("x", "q", "SELECT 1")], cache_dir=CACHE)
    with pytest.raises(ValueError, match=r"meta\['db_path'\]"):
        env.reset(options={"index": 0})
    with pytest.raises(TypeError, match="unknown argument"):
        tir_envs.make("tir/SQL-v0", nope=1)
