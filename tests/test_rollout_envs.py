"""The scripted policy through every registered env, by id, in both schedules.

Each env is created by ``collect`` through ``tir_envs.make`` (so Gymnasium's wrappers are in
the way and the engine must reach the env underneath), runs G episodes per task against real
tools (the Python sandbox, a BM25 index, DuckDB over Spider), and must come back with a ledger
whose policy spans are exactly what the policy wrote.
"""

from __future__ import annotations

import pytest

from tir_envs.registry import ENV_SPECS
from tir_envs.rollout.engine import collect
from tir_envs.rollout.scripted import ScriptedPolicy
from tir_envs.trajectory import Trajectory


def _search_case(qwen_tok):
    from tests.search_helpers import small_index
    from tir_envs.tools.search import open_retriever

    return {
        "env_kwargs": {"tokenizer": qwen_tok, "retriever": open_retriever(small_index("bm25"))},
        "tasks": [{"id": "fr", "question": "What is the capital of France?", "answer": ["Paris"]},
                  {"id": "de", "question": "What is the capital of Germany?",
                   "answer": ["Berlin"]}],
        "script": ["<think>Look it up.</think>\n<search>capital of France</search>",
                   "<think>The document says Paris.</think>\n<answer>Paris</answer>"],
        "rewards": [1.0, 1.0, 0.0, 0.0],
        "observation": "Paris is the capital",
    }


def _sql_case(qwen_tok):
    from tests.sql_helpers import CACHE
    from tir_envs.data.spider import load_spider

    pets = {t.id: t for t in load_spider(["pets_1"])}
    query = "SELECT count(*) FROM Pets WHERE weight > 10"
    return {
        "env_kwargs": {"tokenizer": qwen_tok, "cache_dir": CACHE},
        "tasks": [pets["pets_1/0"], pets["pets_1/2"]],
        "script": [f"<think>Count them.</think>\n<sql>{query}</sql>",
                   f"<think>That is it.</think>\n<solution>{query}</solution>"],
        "rewards": [1.0, 1.0, 0.0, 0.0],
        "observation": "(1 row",
    }


def _math_case(qwen_tok):
    return {
        "env_kwargs": {"tokenizer": qwen_tok},
        "tasks": [{"id": "sum", "question": "What is 1 + 2 + ... + 10?", "answer": "55"},
                  {"id": "sq", "question": "What is 12 squared?", "answer": "144"}],
        # ToRL (the default recipe): the action stops at ```output, the env runs the block
        "script": ["Let me compute.\n```python\nprint(sum(range(1, 11)))\n```\n```output",
                   "So the answer is \\boxed{55}.<|im_end|>"],
        "rewards": [1.0, 1.0, -1.0, -1.0],  # ToRL's +1 / -1
        "observation": "55",
    }


def _autotir_case(qwen_tok):
    from tests.search_helpers import small_index
    from tir_envs.tools.search import open_retriever

    product = str(123456789 * 987654321)
    python = {"domain": "math", "tool": "python"}
    return {
        "env_kwargs": {"tokenizer": qwen_tok, "retriever": open_retriever(small_index("bm25"))},
        "tasks": [{"id": "mul", "question": "What is 123456789 * 987654321?",
                   "answer": product, "meta": python},
                  {"id": "add", "question": "What is 2 + 2?", "answer": "4", "meta": python}],
        "script": ["<think>Too big by hand.</think>\n<code>print(123456789 * 987654321)</code>",
                   f"<answer> The final answer is \\boxed{{{product}}} </answer>"],
        # 0.1 * r_act (the right tool) + 0.9 * r_out (eq. 5: a boxed wrong answer earns 0.1)
        "rewards": [1.0, 1.0, 0.19, 0.19],
        "observation": product,
    }


def _tool_use_case(qwen_tok):
    def capital(country: str) -> str:
        """The capital city of a country."""
        return {"France": "Paris", "Japan": "Tokyo"}[country]

    return {
        "env_kwargs": {"tokenizer": qwen_tok, "tools": [capital]},
        "tasks": [{"id": "fr", "question": "What is the capital of France?", "answer": "Paris"},
                  {"id": "jp", "question": "What is the capital of Japan?", "answer": "Tokyo"}],
        "script": ['<tool_call>{"name": "capital", "arguments": {"country": "France"}}'
                   '</tool_call>', "It is <answer>Paris</answer>"],
        "rewards": [1.0, 1.0, 0.0, 0.0],
        "observation": "Paris",
    }


def _openenv_case(qwen_tok):
    pytest.importorskip("openenv")
    from tests.openenv_helpers import guess_app

    return {  # a native OpenEnv env, served in-process; its reward and done become ours
        "env_kwargs": {"tokenizer": qwen_tok, "app": guess_app()},
        "tasks": [{"id": "a", "question": "Find the number."},
                  {"id": "b", "question": "Find it again."}],
        "script": ['<tool_call>{"name": "step", "arguments": {"guess": 7}}</tool_call>'],
        "rewards": [1.0, 1.0, 1.0, 1.0],  # the remote env's reward; its done ends the episode
        "observation": "Right!",
    }


CASES = {"tir/Search-v0": _search_case, "tir/SQL-v0": _sql_case, "tir/MathCode-v0": _math_case,
         "tir/AutoTIR-v0": _autotir_case, "tir/ToolUse-v0": _tool_use_case,
         "tir/OpenEnv-v0": _openenv_case}


def test_every_registered_env_has_a_case():
    assert set(CASES) == set(ENV_SPECS)


@pytest.mark.parametrize("mode", ["async", "sync"])
@pytest.mark.parametrize("env_id", sorted(CASES))
def test_scripted_policy_through_env(env_id, mode, qwen_tok):
    case = CASES[env_id](qwen_tok)
    policy = ScriptedPolicy(case["script"], qwen_tok, logprob=-0.5)
    out = collect(env_id, policy, case["tasks"], samples_per_task=2, max_concurrency=3,
                  mode=mode, env_kwargs=case["env_kwargs"], progress=False)
    assert len(out) == 4 and [len(g) for g in out.groups()] == [2, 2]
    assert not any(t.infra_failed for t in out), [t.metadata.get("failure") for t in out]
    assert [t.reward for t in out] == pytest.approx(case["rewards"])
    for t in out:
        assert t.env_id == env_id and t.num_tool_calls == 1
        _check_ledger(t, qwen_tok, policy)
        assert case["observation"] in qwen_tok.decode(
            t.token_ids[slice(*t.turns[0].observation_span)])
        assert Trajectory.from_dict(t.to_dict()).token_ids == t.token_ids


def _check_ledger(t: Trajectory, tok, policy: ScriptedPolicy) -> None:
    """Policy spans carry loss and the policy's logprob; nothing else does."""
    spans = [turn.action_span for turn in t.turns]
    mask = [0] * len(t.token_ids)
    for a, b in spans:
        mask[a:b] = [1] * (b - a)
    assert t.loss_mask == mask
    assert all(lp == -0.5 for lp, m in zip(t.logprobs, t.loss_mask) if m)
    first = tok.decode(t.token_ids[slice(*spans[0])])
    assert policy.script[0].startswith(first) or first.startswith(policy.script[0])


