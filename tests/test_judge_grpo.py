"""Judge rewards in the bundled GRPO trainer on the toy: pointwise (the env judges each
episode) and grouped (one judge call per group, after the rollout, before advantages)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from tir_envs.chat.vocab import qwen3_tokenizer  # noqa: E402
from tir_envs.judge import JudgeClient, JudgeReward, Rubric  # noqa: E402
from tir_envs.judge.gullible import GullibleJudge  # noqa: E402
from tir_envs.trainers.grpo.config import GRPOConfig  # noqa: E402
from tir_envs.trainers.grpo.toy_env import ToyToolEnv, toy_tasks  # noqa: E402
from tir_envs.trainers.grpo.trainer import GRPOTrainer  # noqa: E402

TOY = Path(__file__).resolve().parents[1] / "trainers" / "grpo" / "configs" / "toy.yaml"


@pytest.mark.parametrize("mode", ["pointwise", "scores"])
def test_the_trainer_trains_on_judge_rewards(tmp_path, mode):
    tok = qwen3_tokenizer()
    judge = GullibleJudge(tok)
    reward = JudgeReward(JudgeClient(judge, tok, thinking="off"), Rubric.equivalence(),
                         mode=mode)
    config = GRPOConfig.load(TOY, [f"train.output_dir={tmp_path}", "train.tensorboard=false",
                                   "rollout.tasks_per_step=2", "rollout.samples_per_task=4",
                                   "algorithm.mask_void=false", "train.steps=1",
                                   "train.dump_rollouts=true"])
    trainer = GRPOTrainer(config, env=lambda: ToyToolEnv(reward=reward))
    trainer.train()
    rows = [json.loads(x) for x in (tmp_path / "rollouts" / "step_00001.jsonl").read_text()
            .splitlines()]
    assert len(rows) == 8
    secrets = {t.id: str(t.answer) for t in toy_tasks()}
    judged = 0
    for row in rows:
        record = row["metadata"]["judge"]
        right = record["answer"] == secrets[row["task_id"]]  # the digit the judge was given
        assert row["reward"] == float(right)  # the judge (honest on honest answers) agrees
        assert not record.get("pending")
        if "skipped" in record:  # no digit: never shown to the judge
            assert record["answer"] is None
            continue
        judged += 1
        assert record["mode"] == mode and record["exchange"]["output"].endswith(
            "]" if mode == "scores" else str(10 * right))
        if mode == "scores":
            assert record["group_size"] == 4 and record["label"] == f"A{record['position'] + 1}"
    metrics = trainer.history[-1]
    groups = len({r["task_id"] for r in rows if "skipped" not in r["metadata"]["judge"]})
    assert metrics["judge/requests"] == (judged if mode == "pointwise" else groups)
    assert metrics["judge/tokens"] > 0 and "judge/cache_hit_rate" in metrics
    assert judge.calls == metrics["judge/calls"]
