"""``EpisodeRunner``: the one episode loop (its pool, failure record, deadline, cancellation)."""

from __future__ import annotations

import asyncio

import pytest

from tests.fixtures.rollout_envs import LookupEnv
from tir_envs import EpisodeFailure, GenerationLimits, Trajectory
from tir_envs.rollout import EpisodeRunner, Lockstep, SamplingParams
from tir_envs.rollout.scripted import ScriptedPolicy

TASK = {"id": "a", "question": "first?", "answer": "42"}
ANSWER_42 = ["<search>paris</search>", "<answer>42</answer><|im_end|>"]


def test_run_returns_the_episode_with_its_tags_and_the_env_goes_back(qwen_tok):
    envs = [LookupEnv()]
    runner = EpisodeRunner(envs)

    async def main():
        a = await runner.run(ScriptedPolicy(ANSWER_42, qwen_tok), options={"task": TASK},
                             tags={"job": 7})
        b = await runner.run(ScriptedPolicy(ANSWER_42, qwen_tok), options={"task": TASK})
        return a, b

    a, b = asyncio.run(main())
    assert a.reward == 1.0 and a.failure is None and a.metadata["job"] == 7
    assert a.metadata["finish_reasons"] == ["stop", "stop"] and b.reward == 1.0
    assert a is not b and runner.capacity == 1


def test_the_limits_are_typed_and_mirrored_for_gymnasium(qwen_tok):
    env = LookupEnv()
    _, info = env.reset(options={"task": TASK})
    limits = info["limits"]
    assert isinstance(limits, GenerationLimits) and limits == env.limits
    assert list(limits.stop) == info["stop_sequences"]
    assert limits.max_new_tokens == info["max_new_tokens"]
    # a wrapper's change of the mirrored keys is obeyed
    changed = GenerationLimits.from_info({**info, "stop_sequences": ["</x>"]})
    assert changed.stop == ("</x>",) and changed.max_new_tokens == limits.max_new_tokens
    assert GenerationLimits.from_info(info) is limits


def test_sampling_is_used_as_given_and_capped_by_the_limits(qwen_tok):
    seen = []

    class Recording(ScriptedPolicy):
        async def generate(self, prompt_ids, stop, sampling):
            seen.append((sampling.seed, sampling.max_tokens))
            return await super().generate(prompt_ids, stop, sampling)

    runner = EpisodeRunner(lambda: LookupEnv(max_total_tokens=200))
    traj = asyncio.run(runner.run(Recording(ANSWER_42, qwen_tok), options={"task": TASK},
                                  sampling=SamplingParams(max_tokens=10 ** 6, seed=11)))
    assert [s for s, _ in seen] == [11, 11]
    assert seen[0][1] == 200 - len(traj.prompt_ids)
    asyncio.run(runner.aclose())


def test_a_failure_is_one_typed_record_serialised_with_the_trajectory(qwen_tok):
    class Broken:
        async def generate(self, prompt_ids, stop, sampling):
            raise ConnectionResetError("gone")

    traj = asyncio.run(EpisodeRunner(LookupEnv).run(Broken(), options={"task": TASK}))
    assert traj.failure == EpisodeFailure("policy_error",
                                          "Broken.generate failed: ConnectionResetError: gone")
    assert traj.infra_failed and traj.stop_reason == "policy_error"
    back = Trajectory.from_dict(traj.to_dict())
    assert back.failure == traj.failure
    with pytest.raises(ValueError, match="kind must be one of"):
        EpisodeFailure("error", "x")


def test_a_reset_that_raises_is_an_infra_failure_on_a_fresh_ledger(qwen_tok):
    runner = EpisodeRunner([LookupEnv()])
    traj = asyncio.run(runner.run(ScriptedPolicy(ANSWER_42, qwen_tok),
                                  options={"nope": 1}))
    assert traj.failure.kind == "infra" and "unknown reset option" in traj.failure.message
    assert traj.stop_reason == "error" and traj.token_ids == []


def test_cancellation_closes_the_sessions_and_returns_the_env(qwen_tok):
    env = LookupEnv()
    runner = EpisodeRunner([env])
    policy = ScriptedPolicy(["<search>slow:30:x</search>", "<answer>42</answer>"], qwen_tok)

    async def main():
        task = asyncio.create_task(runner.run(policy, options={"task": TASK}))
        while env.lookup.open_sessions == 0:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert env.lookup.open_sessions == 0
        # the env is back in the pool: the next episode gets it at once
        return await asyncio.wait_for(runner.run(ScriptedPolicy(ANSWER_42, qwen_tok),
                                                 options={"task": TASK}), 5)

    assert asyncio.run(main()).reward == 1.0


def test_the_deadline_is_a_timeout_failure(qwen_tok):
    env = LookupEnv()
    runner = EpisodeRunner([env], episode_timeout_s=0.2)
    policy = ScriptedPolicy(["<python>hang</python>"], qwen_tok)
    traj = asyncio.run(runner.run(policy, options={"task": TASK}))
    assert traj.failure.kind == "timeout" and traj.stop_reason == "timeout"
    assert len(traj.turns) == 1 and env.lookup.open_sessions == 0


def test_open_drives_the_same_episode_a_phase_at_a_time(qwen_tok):
    runner = EpisodeRunner([LookupEnv()])
    policy = ScriptedPolicy(ANSWER_42, qwen_tok)

    async def main():
        episode = await runner.open(options={"task": TASK})
        while not episode.done:
            gen = await episode.generate(policy, SamplingParams())
            await episode.step(gen)
        return await episode.close()

    traj = asyncio.run(main())
    assert traj.reward == 1.0 and traj.stop_reason == "answered"


def test_lockstep_waits_for_every_live_party_and_lets_the_ended_leave():
    order = []

    async def party(name, lock, phases):
        try:
            for p in range(phases):
                order.append((name, p))
                await lock.wait()
        finally:
            lock.leave()

    async def main():
        lock = Lockstep(3)
        await asyncio.gather(party("a", lock, 1), party("b", lock, 3), party("c", lock, 3))

    asyncio.run(main())
    phases = [p for _, p in order]
    assert phases == sorted(phases)  # no party starts a phase before all finished the last
    assert sorted(order[3:]) == [("b", 1), ("b", 2), ("c", 1), ("c", 2)]  # "a" left after 0
