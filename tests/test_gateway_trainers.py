"""The bundled GRPO trainer trains on exactly the gateway's segment ledgers, forks included.

``AgentGRPOTrainer`` (``trainers/grpo/agent_rollout.py``) rolls out through a gateway: here
the real ``openai`` SDK tool loop of ``tests.gateway_agents`` against ``ToolLoopPolicy`` on
Qwen3 (thinking on, the real vocabulary).  One task's agent sends its history back unchanged
(one segment per episode); the other drops ``reasoning_content`` (a fork at every later call:
three segments per episode).  Every row of the trainer's batch is one gateway segment: the same
prompt ids, response ids, loss mask, sampler logprobs and host reward; and an update on that
batch moves the weights.
"""

from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch")

from tests.gateway_agents import chat_agent  # noqa: E402
from tests.gateway_helpers import ToolLoopPolicy  # noqa: E402
from tir_envs.chat import resolve_renderer  # noqa: E402
from tir_envs.codec import Codec  # noqa: E402
from tir_envs.tokenizer import family_tokenizer  # noqa: E402
from tir_envs.trainers.grpo.agent_rollout import AgentGRPOTrainer  # noqa: E402
from tir_envs.trainers.grpo.agents_math import config  # noqa: E402
from tir_envs.trainers.grpo.batch import build_batch  # noqa: E402

TASKS = [{"id": "keeps-history", "keep": True}, {"id": "drops-reasoning", "keep": False}]


async def agent(task, base_url, api_key):
    return await chat_agent(base_url, api_key, keep_reasoning=task["keep"])


def tiny_qwen2(tok):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    return Qwen2ForCausalLM(Qwen2Config(
        vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id))


@pytest.fixture(scope="module")
def rollout(tmp_path_factory):
    tok = family_tokenizer("qwen3")
    renderer = resolve_renderer(tok, Codec(tok), "qwen3", "on")
    policy = ToolLoopPolicy(tok, renderer, calls=2)
    flips = itertools.count()
    # the host's reward: alternating 1 / 0 by finish order, so every group has a spread
    reward = lambda task, conversation: float(next(flips) % 2)  # noqa: E731
    c = config([f"train.output_dir={tmp_path_factory.mktemp('gw-grpo')}",
                "rollout.samples_per_task=2", "rollout.tasks_per_step=2",
                "rollout.max_tokens=256", "algorithm.ppo_epochs=1",
                "algorithm.micro_batch_size=2",
                "algorithm.mini_batch_size=null"])
    trainer = AgentGRPOTrainer(c, agent, TASKS, reward, renderer=renderer, tokenizer=tok,
                               model=tiny_qwen2(tok), policy=policy)
    finished = []
    trainer.gateway.on_finish.append(finished.append)
    try:
        trainer.tasks.shuffle = False
        groups = trainer._rollout(2)
        batch = build_batch(groups, trainer.pad_id, "std")
        before = [p.detach().clone() for p in trainer.model.parameters()]
        stats = trainer.update(batch)
        moved = any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))
        yield groups, batch, finished, stats, moved, trainer.episode_stats
    finally:
        trainer.logger.close()
        trainer.close()


def test_each_row_is_one_gateway_segment_exactly(rollout):
    groups, batch, finished, _, _, stats = rollout
    segments = [t for r in finished for t in r.trajectories]
    rows = [t for g in groups for t in g.trajectories]
    assert len(finished) == 4 and len(batch) == len(rows) == len(segments)
    assert {id(t) for t in rows} == {id(t) for t in segments}  # the gateway's own objects
    assert stats[-1]["breaks"] == 2 * 2  # the dropping task: two forks in each episode
    by_task = {g.key: len(g.trajectories) for g in groups}
    assert sorted(by_task.values()) == [2, 6]  # 1 segment a run vs 3 (forked) a run
    for i, t in enumerate(rows):
        p = int(batch.prompt_lengths[i])
        n = int(batch.attention_mask[i].sum())
        ids = batch.input_ids[i].tolist()
        assert ids[:p] == t.prompt_ids and ids[p:n] == t.token_ids
        assert batch.loss_mask[i, p:n].tolist() == [float(m) for m in t.loss_mask]
        assert not batch.loss_mask[i, :p].any() and not batch.loss_mask[i, n:].any()
        assert batch.old_logprobs[i, p:n].tolist() == [float(x) for x in t.logprobs]
        assert sum(t.loss_mask) and all(lp == -0.25 for lp, m in zip(t.logprobs, t.loss_mask)
                                        if m)
    for r in finished:  # each segment carries its episode's host reward
        assert {t.reward for t in r.trajectories} == {r.reward}
        assert r.breaks == (0 if r.task["keep"] else 2)
        for t, fork in zip(r.trajectories[1:], r.forks):
            assert "client changed history" in fork.reason and t.metadata["fork"]


def test_the_update_trains_on_them(rollout):
    groups, batch, _, stats, moved, _ = rollout
    assert batch.has_sampler_logprobs and batch.advantages.abs().sum() > 0
    assert moved and torch.isfinite(torch.tensor(stats["loss"]))
