"""Why an episode forked, and what its client says about its tools.

A fork has a cause: the client rewrote history, the family's template rewrote it by its own rule
(harmony drops earlier analysis once a final answer follows), or the request belongs to another
conversation on the same key (a harness's title call): a side conversation, kept as its own
segment and not counted as a break.  Tool results the client sends back are recorded as the
client's claims (Anthropic's ``is_error``): counted in metrics, never read by rewards or masks.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import aiohttp
import openai

from tests.gateway_agents import TOOLS, anthropic_sdk, chat_agent
from tests.gateway_helpers import ANSWER, check_ledger
from tests.test_gateway import make
from tir_envs.task import Task
from tir_envs.trainers.grpo.filtering import Group
from tir_envs.trainers.grpo.metrics import rollout_metrics

TITLE = [{"role": "system", "content": "Write a five-word title for the user's request."},
         {"role": "user", "content": "Add the numbers, then answer."}]


def _reward(task, conversation):
    return 1.0 if "\\boxed{42}" in conversation[-1]["content"] else 0.0


def test_a_side_conversation_is_its_own_segment_not_a_break():
    async def main(side_segments):
        gw, policy = make("qwen3", "on", reward=_reward, side_segments=side_segments)
        async with gw:
            url, key = gw.open_episode(Task("t", "q", "42"))
            client = openai.AsyncOpenAI(base_url=url, api_key=key, max_retries=0)
            # a harness's title call before the agent's own conversation, and one after it
            await client.chat.completions.create(model="tir-policy", messages=TITLE)
            assert await chat_agent(url, key) == ANSWER
            await client.chat.completions.create(model="tir-policy", messages=TITLE)
            return await gw.finish(key), policy.seen
    skipped, seen = asyncio.run(main("skip"))
    causes = [f.cause for f in skipped.forks]
    assert causes == ["side_conversation", "client_rewrite"], causes
    # the second title call re-opens the side conversation: a fork inside it, not a break
    assert skipped.breaks == 0 and skipped.calls == 5
    assert len(skipped.trajectories) == 1 and len(skipped.side_trajectories) == 2
    main_traj = skipped.trajectories[0]
    assert main_traj.metadata["gateway"]["side"] is False and len(main_traj.turns) == 3
    assert all(t.metadata["gateway"]["side"] for t in skipped.side_trajectories)
    # the reward grades the agent's conversation, not the title call made after it
    assert skipped.reward == 1.0 and skipped.answer == ANSWER
    # every segment token-exact, side ones included
    check_ledger(SimpleNamespace(trajectories=skipped.trajectories +
                                 skipped.side_trajectories), seen)

    async def train():  # side_segments="train": side segments are samples too
        gw, _ = make("qwen3", "on", side_segments="train")
        async with gw:
            url, key = gw.open_episode()
            client = openai.AsyncOpenAI(base_url=url, api_key=key, max_retries=0)
            for messages in (TITLE, TITLE[1:]):
                await client.chat.completions.create(model="tir-policy", messages=messages)
            return await gw.finish(key)
    trained = asyncio.run(train())
    assert len(trained.trajectories) == 2 and trained.breaks == 0
    assert [f.cause for f in trained.forks] == ["side_conversation"]


def test_harmony_drops_earlier_analysis_by_its_own_rule_not_the_clients():
    """gpt-oss: the client sends the finished tool loop back unchanged with a new question;
    harmony writes the earlier final answer's <|return|> as <|end|> and drops the analysis
    before it, so the episode forks by the template's rule."""
    async def main():
        gw, policy = make("gpt-oss", None)
        async with gw:
            url, key = gw.open_episode()
            assert await chat_agent(url, key) == ANSWER
            history = gw.episodes[key].conversation  # what the gateway answered, as sent
            body = {"model": "tir-policy", "tools": TOOLS,
                    "messages": history + [{"role": "user", "content": "And again?"}]}
            async with aiohttp.ClientSession() as http:
                async with http.post(url + "/chat/completions", json=body,
                                     headers={"Authorization": f"Bearer {key}"}) as resp:
                    assert resp.status == 200, await resp.text()
            return await gw.finish(key), policy.seen
    result, seen = asyncio.run(main())
    check_ledger(result, seen)
    assert result.breaks == 1 and len(result.trajectories) == 2
    fork = result.forks[0]
    assert fork.cause == "template_rule" and "unchanged" in fork.reason
    assert fork.ledger_text.split("⟦")[1].startswith("<|channel|>analysis")


def test_client_tool_reports_are_counted_never_rewarded():
    """The same policy, two clients: one flags every tool result as an error.  Calls and
    claims are counted (labelled client-reported); rewards and masks are the same."""
    async def main(is_error):
        gw, policy = make("qwen3", "on", reward=_reward)
        async with gw:
            url, key = gw.open_episode(Task("t", "q", "42"))
            await anthropic_sdk(url, key, stream=False, is_error=is_error)
            return await gw.finish(key)
    honest, claims_errors = asyncio.run(main(None)), asyncio.run(main(True))
    for r in (honest, claims_errors):
        assert r.tool_calls == 2 and r.client_tools["results"] == 2
        assert r.client_tools["unmatched"] == 0
    assert honest.client_tools["errors"] == 0 and honest.client_tools["flagged"] == 0
    assert claims_errors.client_tools["errors"] == 2 == claims_errors.client_tools["flagged"]
    a, b = honest.trajectories[0], claims_errors.trajectories[0]
    assert a.reward == b.reward == 1.0
    assert a.loss_mask == b.loss_mask and a.token_rewards == b.token_rewards
    assert not any(t.tool_results for t in b.turns)  # the host's record stays the host's
    metrics = rollout_metrics([Group("g", [b])])
    assert metrics["gateway/tool_calls_per_episode"] == 2.0
    assert metrics["gateway/client_reported/tool_error_rate"] == 1.0
    assert rollout_metrics([Group("g", [a])])["gateway/client_reported/tool_error_rate"] == 0.0
