"""Each episode's ledger says which weights sampled it (issue 35, item 3): what an asynchronous
trainer's off-policy correction or staleness filter reads."""

from __future__ import annotations

import asyncio
import json

import pytest

import tir_envs
from tir_envs.rollout import EpisodeRunner, Generation, SamplingParams

TASK = {"id": "t/42", "question": "What is $6 \\times 7$?", "answer": "42"}
ACTIONS = ["```python\nprint(6 * 7)\n```\n```output", "So \\boxed{42}."]


class SwappedMidEpisode:
    """A policy whose weights are updated between the two actions of an episode (what an
    asynchronous trainer does), reporting the version on its own ``version`` attribute or on
    each generation."""

    def __init__(self, codec, on_generation: bool):
        self.codec, self.on_generation, self.version, self.calls = codec, on_generation, 3, 0

    async def generate(self, prompt_ids, stop, sampling):
        ids = self.codec.encode(ACTIONS[self.calls])
        self.calls += 1
        gen = Generation(ids, None, "stop",
                         policy_version=self.version if self.on_generation else None)
        self.version += 1  # the trainer pushed new weights after this call
        return gen


@pytest.mark.parametrize("on_generation", [False, True])
def test_the_ledger_records_the_weights_of_every_action(on_generation):
    env = tir_envs.make("tir/MathCode-v0", protocol="torl", tasks=[TASK])
    runner = EpisodeRunner([env])
    policy = SwappedMidEpisode(env.unwrapped.codec, on_generation)
    traj = asyncio.run(runner.run(policy, options={"task": TASK},
                                  sampling=SamplingParams(max_tokens=64)))
    asyncio.run(runner.aclose())
    env.close()
    assert traj.reward == 1.0
    assert traj.metadata["policy_versions"] == [3, 4]
    assert traj.metadata["policy_version"] == 3  # the oldest weights in the episode
    assert json.loads(json.dumps(traj.to_dict()))["metadata"]["policy_version"] == 3


def test_a_policy_that_never_says_leaves_no_version():
    class Silent:
        def __init__(self, codec):
            self.codec, self.calls = codec, 0

        async def generate(self, prompt_ids, stop, sampling):
            self.calls += 1
            return Generation(self.codec.encode(ACTIONS[self.calls - 1]), None, "stop")

    env = tir_envs.make("tir/MathCode-v0", protocol="torl", tasks=[TASK])
    runner = EpisodeRunner([env])
    traj = asyncio.run(runner.run(Silent(env.unwrapped.codec), options={"task": TASK},
                                  sampling=SamplingParams(max_tokens=64)))
    asyncio.run(runner.aclose())
    env.close()
    assert "policy_version" not in traj.metadata


def test_grpo_dumps_carry_the_step_whose_weights_sampled_them(tmp_path):
    pytest.importorskip("torch")
    from tests.test_grpo_trainer import config
    from tir_envs.trainers.grpo.trainer import GRPOTrainer

    GRPOTrainer(config(tmp_path, "train.steps=2", "train.dump_rollouts=true")).train()
    for step in (1, 2):
        rows = (tmp_path / "rollouts" / f"step_{step:05d}.jsonl").read_text().splitlines()
        versions = {json.loads(r)["metadata"].get("policy_version") for r in rows}
        assert versions == {step - 1}  # sampled by the weights after step - 1 updates
