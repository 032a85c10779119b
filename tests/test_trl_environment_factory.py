"""``environment_factory`` through TRL's own ``GRPOTrainer`` (TRL's tool loop, its Qwen2.5
template), and the drift of its rendering against the env's ledger with that template.

Runs in ``.venv-trl`` (``make test-trl``); skipped where TRL is not installed.
"""

from __future__ import annotations

import pytest

trl = pytest.importorskip("trl", reason="TRL is not installed here; run `make test-trl`")
torch = pytest.importorskip("torch")

from tests.fixtures.trl_parity import tiny_qwen2  # noqa: E402
from tests.test_trl_environment import TASKS, capital, capital_episode_drift  # noqa: E402
from tir_envs.trainers.trl.environment import make_environment_factory  # noqa: E402


@pytest.fixture
def tok():
    """The bundled Qwen2.5 tokenizer with TRL's own copy of the Qwen2.5 chat template (the
    one TRL knows how to parse tool calls for)."""
    from trl.chat_template_utils import qwen2_5_chat_template

    from tir_envs.tokenizer import qwen25_tokenizer
    tokenizer = qwen25_tokenizer()
    tokenizer.chat_template = qwen2_5_chat_template
    return tokenizer


def test_one_grpo_step_with_trls_tool_loop(tmp_path, tok):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    factory = make_environment_factory("tir/ToolUse-v0", tokenizer=tok, tasks=TASKS,
                                       tools=[capital])
    rows = [{"prompt": [{"role": "user", "content": t["question"]}], "label": t["id"]}
            for t in TASKS]
    trainer = GRPOTrainer(
        model=tiny_qwen2(tok), processing_class=tok, train_dataset=Dataset.from_list(rows),
        environment_factory=factory,
        args=GRPOConfig(output_dir=str(tmp_path), use_cpu=True, max_steps=1,
                        per_device_train_batch_size=2, num_generations=2,
                        max_completion_length=8, report_to=[], logging_steps=1, bf16=False))
    trainer.train()
    logged = trainer.state.log_history[0]
    assert any(key.startswith(f"rewards/{factory.__name__}") for key in logged), logged


def test_drift_with_the_qwen25_template(tok):
    env = make_environment_factory("tir/ToolUse-v0", tokenizer=tok, tasks=TASKS,
                                   tools=[capital])()
    try:
        measured = capital_episode_drift(env)
        print("environment_factory drift (TRL's Qwen2.5 template):", measured)
        assert measured["prompt_drift"] > 0
    finally:
        env._close()
