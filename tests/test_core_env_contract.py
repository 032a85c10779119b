"""The env layer's contract (issue 11): tasks= in every form, fail-fast setup errors, generation
info through wrappers, the token budget, executed-call counting, typed outcomes, w/o-tools mode."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import tir_envs
from tests.core_helpers import AnswerEnv, EchoTool
from tests.search_helpers import small_index
from tir_envs.envs.mathcode import MathCodeEnv
from tir_envs.envs.search import SearchEnv
from tir_envs.envs.sql import SQLEnv
from tir_envs.protocols.zerotir import CLOSE_FENCE, OPEN_FENCE

QA = [{"question": "Which city is the capital of France?", "answer": "Paris"}]


def search_env(tok, **kw):
    return SearchEnv(tokenizer=tok, retriever=small_index("bm25"), **kw)


# ----------------------------------------------------------------------------- tasks=
def test_every_env_takes_tasks_as_list_path_or_shipped_name(qwen_tok, tmp_path):
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in QA))
    assert [t.question for t in search_env(qwen_tok, tasks=QA).tasks] == [QA[0]["question"]]
    assert [t.answer for t in search_env(qwen_tok, tasks=str(path)).tasks] == [["Paris"]]
    assert len(search_env(qwen_tok, tasks="bamboogle").tasks) == 125
    assert len(MathCodeEnv(tasks="aime2024", tokenizer=qwen_tok).tasks) == 30
    assert len(SQLEnv(tokenizer=qwen_tok, tasks="spider").tasks) == 972
    base = AnswerEnv(tokenizer=qwen_tok, tasks=str(path))
    assert base.tasks[0].answer == "Paris"


@pytest.mark.parametrize("bad", [5, 2.0, {"question": "q"}, object()])
def test_tasks_of_a_wrong_type_raise(qwen_tok, bad):
    with pytest.raises(TypeError, match="tasks must be a list"):
        AnswerEnv(tokenizer=qwen_tok, tasks=bad)


def test_a_string_is_never_split_into_one_letter_tasks(qwen_tok):
    with pytest.raises(Exception, match="hotpot_typo|no such file"):
        search_env(qwen_tok, tasks="hotpot_typo")
    with pytest.raises(Exception, match="no such file|not a file"):
        AnswerEnv(tokenizer=qwen_tok, tasks="questions_missing.jsonl")


def test_unknown_reset_options_raise(qwen_tok):
    env = AnswerEnv(tokenizer=qwen_tok, tasks=["q"])
    with pytest.raises(ValueError, match=r"unknown reset option\(s\) \['indx'\]"):
        env.reset(options={"indx": 0})
    with pytest.raises(IndexError, match="not an index"):
        env.reset(options={"index": 3})


# ----------------------------------------------------------------------------- fail fast
def test_prompt_longer_than_the_budget_fails_at_reset(qwen_tok):
    env = AnswerEnv(tokenizer=qwen_tok, tasks=["word " * 50], max_total_tokens=20)
    with pytest.raises(ValueError, match="raise max_total_tokens"):
        env.reset()


def test_tokenizer_folder_without_files_fails_at_construction(qwen_tok, tmp_path):
    with pytest.raises(FileNotFoundError, match="no tokenizer files"):
        AnswerEnv(tokenizer=str(tmp_path), tasks=["q"])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        AnswerEnv(tokenizer=str(tmp_path / "nope"), tasks=["q"])



def _spy_from_pretrained(monkeypatch) -> list[dict]:
    """Record every ``AutoTokenizer.from_pretrained`` call's keywords (then run it)."""
    from transformers import AutoTokenizer
    calls: list[dict] = []
    real = AutoTokenizer.from_pretrained.__func__

    def spy(cls, name, *args, **kwargs):
        calls.append(kwargs)
        return real(cls, name, *args, **kwargs)
    monkeypatch.setattr(AutoTokenizer, "from_pretrained", classmethod(spy))
    return calls


@pytest.mark.parametrize("how", ["unreachable", "HF_HUB_OFFLINE"])
def test_a_hub_tokenizer_offline_fails_at_once_naming_a_local_path(monkeypatch, how):
    """Without the hub, transformers would retry for about a minute: only the local cache is
    asked (never the network), and the error says to pass a folder."""
    from tir_envs import tokenizer as tokenizer_module
    calls = _spy_from_pretrained(monkeypatch)
    if how == "unreachable":
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
        for var in tokenizer_module._PROXY_VARS:
            monkeypatch.delenv(var, raising=False)
    else:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        monkeypatch.setattr(tokenizer_module, "hub_reachable",
                            lambda *a: pytest.fail("HF_HUB_OFFLINE needs no connection check"))
    with pytest.raises(OSError, match=r"not in the local Hugging Face cache.*tokenizer=PATH"):
        AnswerEnv(tokenizer="nobody-here/no-such-tokenizer", tasks=["q"])
    assert calls == [{"local_files_only": True}]


def test_hub_reachable_is_a_connection_check(monkeypatch):
    import socket

    from tir_envs.tokenizer import _PROXY_VARS, hub_reachable
    for var in _PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
    with socket.create_server(("127.0.0.1", 0)) as server:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        assert hub_reachable(1.0)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    assert not hub_reachable(1.0)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert hub_reachable(1.0)  # behind a proxy the hub is the proxy's to reach


def test_search_setup_mistakes_fail_at_construction(qwen_tok, tmp_path):
    with pytest.raises(ValueError, match="unknown search backend 'elastic'"):
        SearchEnv(tokenizer=qwen_tok, search_backend="elastic")
    with pytest.raises(FileNotFoundError, match="tir-envs index build"):
        SearchEnv(tokenizer=qwen_tok, retriever=str(tmp_path / "no-index"))


def test_missing_search_extra_names_the_fix(qwen_tok, monkeypatch):
    import importlib.util

    from tir_envs.tools.search import jvm
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "bm25s" else real(name, *a))
    monkeypatch.setattr(jvm, "lucene_available", lambda: False)
    with pytest.raises(ImportError, match=r"tir-envs\[search\]"):
        SearchEnv(tokenizer=qwen_tok, search_backend="bm25")


# ----------------------------------------------------------------------------- generation info
def test_stop_sequences_and_token_room_in_every_info_through_wrappers(qwen_tok):
    env = gym.make("tir/MathCode-v0", protocol="zerotir", tasks=[{"question": "1+1?",
                                                                  "answer": "2"}],
                   tokenizer=qwen_tok)
    assert isinstance(env, gym.Wrapper)
    _, info = env.reset(seed=0)
    assert info["stop_sequences"] == [OPEN_FENCE] and info["max_new_tokens"] > 0
    *_, info = env.step(env.unwrapped.codec.encode("Let me compute.\n```python"))
    assert info["stop_sequences"] == [CLOSE_FENCE]  # paused inside a block: changed mid-episode
    room = info["max_new_tokens"]
    *_, info = env.step(env.unwrapped.codec.encode("\nprint(1 + 1)\n```"))
    assert info["stop_sequences"] == [OPEN_FENCE] and info["max_new_tokens"] < room
    env.close()


# ----------------------------------------------------------------------------- budgets
def test_an_action_longer_than_the_budget_is_cut_and_ends_the_episode(qwen_tok):
    env = AnswerEnv(tokenizer=qwen_tok, tasks=["q"], tools=[EchoTool()], max_total_tokens=60)
    obs, info = env.reset()
    room = info["max_new_tokens"]
    long_action = env.codec.encode("<python>print(1)</python> " + "blah " * 200)
    _, _, term, trunc, info = env.step(long_action)
    traj = info["trajectory"]
    assert trunc and not term and traj.stop_reason == "max_tokens"
    assert len(traj.prompt_ids) + len(traj.token_ids) == env.max_total_tokens
    assert traj.token_ids == long_action[:room] and sum(traj.loss_mask) == room
    assert any(f"{len(long_action) - room} tokens dropped" in n for n in traj.turns[0].notes)
    assert traj.num_tool_calls == 0  # a cut action runs nothing


def test_parse_errors_are_not_tool_calls(qwen_tok):
    env = search_env(qwen_tok, tasks=QA)
    env.reset(options={"index": 0})
    env.step(env.codec.encode("I think the answer is Paris."))  # no tags: a format error
    env.step(env.codec.encode("<search>capital of France</search>"))
    *_, info = env.step(env.codec.encode("<answer>Paris</answer>"))
    traj = info["trajectory"]
    assert traj.num_tool_calls == 1 and traj.num_parse_errors == 1
    assert traj.tool_counts() == {"search": 1}
    assert [r["executed"] for t in traj.turns for r in t.tool_results] == [False, True]


# ----------------------------------------------------------------------------- outcomes
def test_typed_outcome_fields(qwen_tok):
    env = search_env(qwen_tok, tasks=QA)
    env.reset(options={"index": 0})
    *_, info = env.step(env.codec.encode("<answer>Paris</answer>"))
    traj = info["trajectory"]
    assert (traj.correct, traj.answered, traj.answer) == (True, True, "Paris")
    env.reset(options={"index": 0})
    env.step(env.codec.encode("<search>capital of France</search>"))
    env.step(env.codec.encode("<search>France</search>"))
    *_, info = env.step(env.codec.encode("no answer"))
    traj = info["trajectory"]
    assert (traj.correct, traj.answered, traj.answer) == (False, False, None)
    roundtrip = tir_envs.Trajectory.from_dict(json.loads(traj.to_json()))
    assert (roundtrip.correct, roundtrip.answered) == (False, False)


def test_without_tools_one_action_is_the_episode_and_nothing_runs(qwen_tok):
    tool = EchoTool()
    env = MathCodeEnv(tokenizer=qwen_tok, tool=tool, use_tools=False,
                      tasks=[{"question": "What is 6*7?", "answer": "42"}])
    obs, info = env.reset(options={"index": 0})
    prompt = env.codec.decode(obs["tokens"])
    assert "integrate natural language reasoning with programs" not in prompt
    assert "\\boxed{}" in prompt and info["stop_sequences"] == []
    _, reward, term, _, info = env.step(
        env.codec.encode("```python\nprint(6*7)\n```\n```output"))
    assert term and tool.opened == 0 and info["trajectory"].num_tool_calls == 0
    assert reward == -1.0  # ToRL's wrong reward: no answer given


def test_search_without_tools_stops_at_the_answer(qwen_tok):
    env = search_env(qwen_tok, tasks=QA, use_tools=False)
    obs, info = env.reset(options={"index": 0})
    assert "<search>" not in env.codec.decode(obs["tokens"])
    assert info["stop_sequences"] == ["</answer>"]
    _, reward, term, _, _ = env.step(env.codec.encode("<answer>Paris</answer>"))
    assert term and reward == 1.0


@pytest.mark.parametrize("extraction, correct", [("boxed", False), ("fallback", True)])
def test_math_answer_without_a_box_is_read_only_with_fallback(qwen_tok, extraction, correct):
    env = MathCodeEnv(tokenizer=qwen_tok, tool=EchoTool(), extraction=extraction,
                      protocol="zerotir", tasks=[{"question": "6*7?", "answer": "42"}])
    env.reset(options={"index": 0})
    *_, info = env.step(env.codec.encode("I multiplied. The final answer is $42$."))
    assert info["trajectory"].correct is correct
    with pytest.raises(ValueError, match="extraction must be one of"):
        MathCodeEnv(tokenizer=qwen_tok, tool=EchoTool(), extraction="loose")


def test_openai_policy_without_aiohttp_names_the_extra(qwen_tok, monkeypatch):
    import importlib.util

    from tir_envs.rollout.openai_compat import OpenAIPolicy
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "aiohttp" else real(name, *a))
    with pytest.raises(ImportError, match=r"tir-envs\[openai\]"):
        OpenAIPolicy("http://127.0.0.1:9/v1", "m", qwen_tok)


def test_check_env_and_render_warn_nothing():
    """Gymnasium's checker and its passive render check have nothing to say (the text render
    mode declares its fps), so users see no 'No render fps was declared' on every render."""
    import warnings

    from gymnasium.utils.env_checker import check_env
    tasks = [{"question": "1+1?", "answer": "2"}]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        env = tir_envs.make("tir/MathCode-v0", render_mode="ansi", tasks=tasks)
        check_env(env.unwrapped)
        env.reset(seed=0)
        env.step(env.unwrapped.codec.encode("\\boxed{2}"))
        assert "[action]" in env.render()
        env.close()
    assert [str(w.message) for w in seen] == []
