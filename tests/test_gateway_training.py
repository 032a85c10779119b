"""Gateway episodes as the bundled GRPO trainer consumes them: ``AgentSource.groups`` ->
``Group`` -> ``mark_exclusions`` -> ``build_batch``, with the trainer's own code.

An agent that stops after its first tool call (the policy never answered) scores 0, one that
finishes scores 1 (a host-side function of the conversation); a crashed agent's segments are
flagged ``infra_failed`` and excluded.  The batch holds exactly the valid segments, their
sampled tokens as the loss mask with the sampler's logprobs, and group-relative advantages whose
signs follow the rewards.
"""

from __future__ import annotations

import asyncio
import itertools
import json

import openai

from tests.gateway_agents import TOOLS
from tests.gateway_helpers import ANSWER, tool_add
from tests.test_gateway import make
from tir_envs.gateway import AgentSource
from tir_envs.task import Task
from tir_envs.trainers.grpo.batch import build_batch
from tir_envs.trainers.grpo.filtering import Group, mark_exclusions


def test_gateway_groups_train_with_the_grpo_batch_builder():
    turn = itertools.count()

    async def agent(task, base_url, api_key):
        n = next(turn)
        client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        messages = [{"role": "user", "content": task.question}]
        while True:
            reply = await client.chat.completions.create(model="tir-policy", messages=messages,
                                                         tools=TOOLS)
            msg = reply.choices[0].message.model_dump(exclude_none=True)
            messages.append(msg)
            if task.id == "crash" and n % 3 == 2:  # after the policy sampled a turn
                raise RuntimeError("the agent crashed")
            if not msg.get("tool_calls"):
                return msg["content"]
            if n % 2:  # this sample gives up after one tool call
                return None
            for call in msg["tool_calls"]:
                messages.append({"role": "tool", "tool_call_id": call["id"], "content":
                                 tool_add(**json.loads(call["function"]["arguments"]))})

    def reward(task, conversation):
        return float(conversation[-1]["content"] == ANSWER)

    async def main():
        gw, _ = make("qwen3", "on", reward=reward)
        async with gw:
            source = AgentSource(gw, agent, concurrency=1)  # in order: the counter decides
            return await source.groups([Task("t0", "Add.", "42"), Task("crash", "Add.", "42")],
                                       samples_per_task=3)
    raw = asyncio.run(main())
    groups = [mark_exclusions(Group(f"g{i}", trajs)) for i, trajs in enumerate(raw)]
    assert [t.reward for t in groups[0].trajectories] == [1.0, 0.0, 1.0]
    assert groups[1].excluded == [None, None, "infra"]
    assert "crashed" in groups[1].trajectories[2].metadata["failure"]["message"]
    batch = build_batch(groups, pad_id=0)
    valid = [t for g in groups for t, why in zip(g.trajectories, g.excluded) if why is None]
    assert len(batch) == len(valid) == 5
    assert int(batch.loss_mask.sum()) == sum(t.num_policy_tokens for t in valid)
    assert batch.has_sampler_logprobs
    sampled = batch.old_logprobs[batch.loss_mask.bool()]
    assert bool(((sampled - (-0.25)).abs() < 1e-6).all())
    for adv, traj in zip(batch.advantages.tolist(), valid):
        assert (adv > 0) == (traj.reward == 1.0)
