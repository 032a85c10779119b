"""Chat mode around the renderers: what ``make()`` accepts and refuses, stop ids reaching the
policy, the template path's end-of-turn rule, ``chat-check``, and the pinned tokenizer."""

from __future__ import annotations

import copy
import json

import pytest

import tir_envs
from tests.core_helpers import EchoTool
from tir_envs.chat.vocab import family_tokenizer, stand_in_tokenizer
from tir_envs.cli import main as cli
from tir_envs.env import TIREnv
from tir_envs.rollout import ScriptedPolicy, collect
from tir_envs.viewer import pick_tokenizer, load_episodes

MATH = {"question": "What is 6 * 7?", "answer": "42"}


def test_mathcode_takes_chat_and_rite_is_chat_only():
    env = tir_envs.make("tir/MathCode-v0", chat=True, tasks=[MATH])
    try:
        obs, _ = env.reset(seed=0)
        text = env.unwrapped.codec.decode(obs["tokens"].tolist())
        assert text.startswith("<|im_start|>user\n") and "A conversation between User" in text
    finally:
        env.close()
    with pytest.raises(ValueError, match="chat only"):
        tir_envs.make("tir/MathCode-v0", protocol="rite", chat=False, tasks=[MATH])
    with pytest.raises(ValueError, match="renderer=/thinking= apply to chat mode"):
        tir_envs.make("tir/MathCode-v0", thinking="on", tasks=[MATH])


GLM_LIKE = ("{% for m in messages %}{% if m.role == 'tool' %}<|observation|>\n{{ m.content }}"
            "{% else %}<|{{ m.role }}|>\n{{ m.content }}{% endif %}{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
TOJSON = ("{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
          "{% if m.role == 'tool' %}{{ m.content | tojson }}{% else %}{{ m.content }}{% endif %}"
          "<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant"
          "<|end_header_id|>\n\n{% endif %}")


def _with_template(family: str, template: str):
    tok = copy.deepcopy(stand_in_tokenizer(family))
    tok.chat_template = template
    return tok


def test_an_observation_the_policy_sampled_is_not_added_again():
    tok = _with_template("glm-4.5", GLM_LIKE)
    env = TIREnv(tokenizer=tok, tasks=["q"], tools=[EchoTool("42")], tool_format="tags",
                 observation_role="tool", renderer="template")
    env.reset(seed=0)
    assert tok.convert_tokens_to_ids("<|observation|>") in env.limits.stop_token_ids
    action = env.codec.encode("<python>x</python><|observation|>")
    obs, *_ = env.step(action)
    # the glue is "<|observation|>\n" BODY "<|assistant|>\n"; its sampled opener is not repeated
    assert env.codec.decode(obs["tokens"].tolist()) == "\n\n<result>\n42\n</result>\n<|assistant|>\n"
    ledger = env.codec.decode(env.trajectory.token_ids)
    assert ledger.count("<|observation|>") == 1


def test_a_template_that_is_not_prefix_stable_is_refused_naming_renderers():
    tok = _with_template("llama-3", TOJSON)
    with pytest.raises(ValueError, match="renderer=FAMILY.*qwen3"):
        TIREnv(tokenizer=tok, tasks=["q"], tool_format="tags", observation_role="tool",
               renderer="template")


def test_stop_ids_reach_the_policy_and_cut_the_action():
    tok = family_tokenizer("qwen3")
    script = ["<think>\nok\n</think>\n\nThe answer is 42.<|im_end|>MORE TEXT AFTER THE TURN"]
    out = collect(lambda: TIREnv(tokenizer=tok, tasks=["q"], renderer="qwen3"),
                  ScriptedPolicy(script, tokenizer=tok), ["q"], progress=False)
    traj = out[0]
    assert tok.decode(traj.token_ids).endswith("42.<|im_end|>")
    assert traj.metadata["tokenizer"] == "family:qwen3"


def test_chat_check(capsys):
    assert cli(["chat-check", "family:qwen3", "--thinking", "off"]) == 0
    out = capsys.readouterr().out
    assert "renderer: qwen3, thinking off" in out and "151645 '<|im_end|>'" in out
    assert "<tool_response>\\nRESULT\\n</tool_response>" in out
    assert cli(["chat-check", "family:llama-3"]) == 0
    assert "STAND-IN" in capsys.readouterr().out
    assert cli(["chat-check", "family:mistral", "--thinking", "on"]) == 1


def test_the_viewer_decodes_with_the_pinned_tokenizer(tmp_path):
    tok = family_tokenizer("mistral")
    out = collect(lambda: TIREnv(tokenizer=tok, tasks=["q"], tool_format="tags"),
                  ScriptedPolicy(["It is 42.</s>"], tokenizer=tok), ["q"], progress=False,
                  out=tmp_path / "t.jsonl")
    assert out[0].metadata["tokenizer"] == "family:mistral"
    episodes, settings = load_episodes(tmp_path / "t.jsonl")
    picked, guessed = pick_tokenizer(None, settings, episodes)
    assert len(picked) == len(tok) and not guessed
    for e in episodes:
        e.trajectory.metadata.pop("tokenizer")
    assert pick_tokenizer(None, {}, episodes)[1]  # nothing pinned: a guess, and it says so
    assert json.loads((tmp_path / "t.jsonl").read_text().splitlines()[0])["metadata"][
        "tokenizer"] == "family:mistral"


def test_an_observation_in_the_same_turn_closes_a_reasoning_block_first():
    """SkyRL-SQL writes its notice into the assistant turn: a block the budget cut is closed
    by the env (``</think>``, loss mask 0) before it, and the query inside it is not run."""
    from tests.sql_helpers import CACHE
    from tir_envs.data.spider import load_spider
    from tir_envs.envs.sql import SQLEnv

    tok = family_tokenizer("qwen3")
    env = SQLEnv(tokenizer=tok, tasks=load_spider(["pets_1"])[:1], cache_dir=CACHE,
                 thinking="on")
    try:
        env.reset(seed=0)
        action = tok.encode("<think>\nmaybe <sql>SELECT count(*) FROM Pets</sql> then",
                            add_special_tokens=False)
        obs, reward, term, trunc, info = env.step(action)
        ids = obs["tokens"].tolist()
        assert ids[0] == tok.convert_tokens_to_ids("</think>") and not term
        turn = info["turn"]  # the protocol's invalid-action notice, nothing executed
        assert all(c["error"] for c in turn.tool_calls)
        assert not any(r["executed"] for r in turn.tool_results)
        assert env.trajectory.loss_mask[-len(ids):] == [0] * len(ids)
    finally:
        env.close()
