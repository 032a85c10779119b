"""The trainer with vLLM generating (``rollout.backend=vllm``): after every update the engine
gets the new weights, so its sampling logprobs stay those of the model being trained.

vLLM has no wheel that shares the project venv on CPU, so this module is skipped where vLLM is
not installed.  Run it in the vLLM CPU venv that ``make test-vllm`` builds::

    VLLM_CPU_KVCACHE_SPACE=1 .venv-vllm/bin/python -m pytest -q tests/test_grpo_vllm.py
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest

vllm = pytest.importorskip("vllm", reason="vLLM is not installed here; see the module docstring")
torch = pytest.importorskip("torch")

from tir_envs.trainers.grpo.batch import build_batch  # noqa: E402
from tir_envs.trainers.grpo.config import GRPOConfig  # noqa: E402
from tir_envs.trainers.grpo.logprobs import token_logprobs  # noqa: E402
from tir_envs.trainers.grpo.trainer import GRPOTrainer  # noqa: E402

TOY = Path(__file__).resolve().parents[1] / "trainers" / "grpo" / "configs" / "toy.yaml"


def sampler_vs_model(trainer, model):
    """Max |sampler logprob - model logprob| over the policy tokens of a fresh rollout."""
    batch = build_batch(trainer._rollout(8), trainer.pad_id)
    assert batch.has_sampler_logprobs
    with torch.no_grad():
        lp, _ = token_logprobs(model, batch.input_ids, batch.attention_mask, 1.0)
    on = batch.loss_mask > 0
    return float((lp[on] - batch.old_logprobs[on]).abs().max())


def test_vllm_generator_follows_the_trained_weights(tmp_path):
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    config = GRPOConfig.load(TOY, [
        f"train.output_dir={tmp_path}", "train.tensorboard=false", "rollout.backend=vllm",
        "rollout.tasks_per_step=8", "optim.lr=0.02", "algorithm.mask_void=false",
        # head size 64: what vLLM's CPU attention supports
        "model.random_init.hidden_size=128", "model.random_init.intermediate_size=256",
        "model.random_init.num_attention_heads=2", "model.random_init.num_key_value_heads=1",
        "rollout.vllm={dtype: float32, max_model_len: 64, enforce_eager: true, "
        "max_num_seqs: 64}"])
    trainer = GRPOTrainer(config)
    try:
        initial = copy.deepcopy(trainer.model)
        assert sampler_vs_model(trainer, trainer.model) < 2e-3
        for _ in range(3):
            trainer.train_step()
        assert trainer.policy.weight_version == 3  # one push per update
        assert sampler_vs_model(trainer, trainer.model) < 2e-3
        assert sampler_vs_model(trainer, initial) > 0.05  # the weights did move
    finally:
        trainer.close()
