"""TRL's ``GRPOTrainer`` consumes gateway episodes through the adapter's ``rollout_func`` seam.

The real ``openai`` SDK tool loop (``tests.gateway_agents.chat_agent``) runs against a gateway
over ``ToolLoopPolicy`` on Qwen3 (thinking on, the real vocabulary), passed to
``GatewayRollout`` as the trainer's policy; TRL's own ``_generate_and_score_completions`` builds
the batch.  Each row must be its episode's gateway segment token for token: prompt ids,
completion ids, ``tool_mask`` (the segment's loss mask), the sampler's logprobs and the host's
reward.  An agent that drops ``reasoning_content`` forks its episodes: TRL's fixed groups have
no room for the extra segments, so the default refuses the batch and ``on_fork="last"`` trains
on each episode's last segment.

Runs in ``.venv-trl`` (``make test-trl``); skipped where TRL is not installed.
"""

from __future__ import annotations

import itertools

import pytest

trl = pytest.importorskip("trl", reason="TRL is not installed here; run `make test-trl`")
torch = pytest.importorskip("torch")
pytest.importorskip("openai", reason="the gateway extra is not installed")

from tests.gateway_agents import chat_agent  # noqa: E402
from tests.gateway_helpers import ToolLoopPolicy  # noqa: E402
from tir_envs.chat import resolve_renderer  # noqa: E402
from tir_envs.codec import Codec  # noqa: E402
from tir_envs.tokenizer import family_tokenizer  # noqa: E402
from tir_envs.trainers.trl.gateway import GatewayRollout  # noqa: E402
from tir_envs.trainers.trl.rollout import env_reward  # noqa: E402

GROUP = 2
TASKS = {"a": {"id": "a", "keep": True}, "b": {"id": "b", "keep": True},
         "drop": {"id": "drop", "keep": False}}


async def agent(task, base_url, api_key):
    return await chat_agent(base_url, api_key, keep_reasoning=task["keep"])


def tiny_qwen2(tok):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    return Qwen2ForCausalLM(Qwen2Config(
        vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id))


def build(tmp_path, on_fork):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    tok = family_tokenizer("qwen3")
    renderer = resolve_renderer(tok, Codec(tok), "qwen3", "on")
    flips = itertools.count()
    rollout = GatewayRollout(agent, lambda task, conversation: float(next(flips) % 2),
                             tasks=TASKS, generate=ToolLoopPolicy(tok, renderer, calls=2),
                             renderer=renderer, on_fork=on_fork)
    rewards: list = []

    def recorded_env_reward(completions, **kwargs):
        values = env_reward(completions, **kwargs)
        rewards.extend(values)
        return values

    recorded_env_reward.__name__ = "env_reward"
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, per_device_train_batch_size=4,
                      num_generations=GROUP, max_completion_length=256, max_steps=1,
                      report_to=[], bf16=False, save_strategy="no")
    trainer = GRPOTrainer(model=tiny_qwen2(tok), processing_class=tok,
                          reward_funcs=[recorded_env_reward], args=args,
                          train_dataset=Dataset.from_list([{"prompt": k} for k in TASKS]),
                          rollout_func=rollout)
    return trainer, rollout, rewards


def rows(out):
    for i in range(out["prompt_ids"].shape[0]):
        p = out["prompt_mask"][i].bool()
        n = int(out["completion_mask"][i].sum())
        yield (out["prompt_ids"][i][p].tolist(), out["completion_ids"][i, :n].tolist(),
               out["tool_mask"][i, :n].tolist(), out["sampling_per_token_logps"][i, :n].tolist(),
               n, out["completion_mask"][i])


def test_each_trl_row_is_its_gateway_segment(tmp_path):
    trainer, rollout, rewards = build(tmp_path, "error")
    try:
        out = trainer._generate_and_score_completions(
            [{"prompt": k} for k in ("a", "b") for _ in range(GROUP)])
        results = rollout.last_results
        assert [r.task["id"] for r in results] == ["a", "a", "b", "b"]  # TRL's group order
        assert all(len(r.trajectories) == 1 and r.breaks == 0 for r in results)
        for (prompt, ids, mask, logprobs, n, cmask), r in zip(rows(out), results):
            seg = r.trajectories[0]
            assert prompt == seg.prompt_ids and ids == seg.token_ids
            assert mask == list(seg.loss_mask) and n == len(seg.token_ids)
            assert logprobs == [float(x) for x in seg.logprobs]
            assert sum(seg.loss_mask) and 0 in seg.loss_mask  # sampled and inserted tokens
            assert all(lp == -0.25 for lp, m in zip(seg.logprobs, seg.loss_mask) if m)
        assert rewards == [r.reward for r in results] and set(rewards) == {0.0, 1.0}
        assert out["advantages"].abs().sum() > 0  # TRL's groups see the host's rewards

        # a forking agent: three segments an episode, which TRL's fixed groups cannot hold
        with pytest.raises(ValueError, match="on_fork='last'"):
            trainer._generate_and_score_completions([{"prompt": "drop"} for _ in range(GROUP)])
    finally:
        rollout.close()


def test_on_fork_last_trains_on_the_last_segment(tmp_path):
    trainer, rollout, rewards = build(tmp_path, "last")
    try:
        out = trainer._generate_and_score_completions([{"prompt": "drop"} for _ in range(GROUP)])
        results = rollout.last_results
        assert [len(r.trajectories) for r in results] == [3, 3]
        assert all(r.breaks == 2 for r in results)
        for (prompt, ids, mask, logprobs, _, _), r in zip(rows(out), results):
            seg = r.trajectories[-1]
            assert seg.metadata["fork"]
            assert prompt == seg.prompt_ids and ids == seg.token_ids
            assert mask == list(seg.loss_mask)
            assert logprobs == [float(x) for x in seg.logprobs]
        assert rewards == [r.reward for r in results] and set(rewards) == {0.0, 1.0}
    finally:
        rollout.close()
