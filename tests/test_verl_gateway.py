"""verl consumes gateway episodes through its agent-loop seam.

verl's own ``AgentLoopWorker.generate_sequences`` (a Parquet batch read by verl's
``RLHFDataset``, the agent-loop YAML, verl's padding and stacking) runs ``GatewayAgentLoop``
on each row: the real ``openai`` SDK tool loop against a gateway over verl's LLM client
(``VerlServerPolicy``), the client answering from ``ToolLoopPolicy`` on Qwen3 (thinking on).
Each row of verl's batch must be its episode's gateway segment token for token: prompt ids,
response ids, ``response_mask`` (the segment's loss mask), ``rollout_log_probs`` and the host's
reward (``rm_scores``).  A forking agent is refused by default (verl stacks one sample per
row) and gives its last segment with ``on_fork="last"``.

Runs in ``.venv-verl`` (``make test-verl``); skipped where verl is not installed.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest

pytest.importorskip("verl", reason="verl is not installed here; run `make test-verl`")
pytest.importorskip("openai", reason="the gateway extra is not installed")

from tests.fixtures import verl_worker as vw  # noqa: E402
from tests.gateway_agents import chat_agent  # noqa: E402
from tests.gateway_helpers import ToolLoopPolicy  # noqa: E402
from tir_envs.chat import resolve_renderer  # noqa: E402
from tir_envs.codec import Codec  # noqa: E402
from tir_envs.rollout.policy import SamplingParams  # noqa: E402
from tir_envs.tokenizer import family_tokenizer  # noqa: E402

TASKS = {"a": {"id": "a", "keep": True}, "b": {"id": "b", "keep": True},
         "drop": {"id": "drop", "keep": False}}
_FLIPS = itertools.count()


async def agent(task, base_url, api_key):
    return await chat_agent(base_url, api_key, keep_reasoning=task["keep"])


def reward(task, conversation):
    """The host's reward: alternating 1 / 0 by finish order."""
    return float(next(_FLIPS) % 2)


class Client:
    """verl's LLM client contract answered by ``ToolLoopPolicy`` (``TokenOutput`` back)."""

    def __init__(self, policy):
        self.policy, self.params = policy, []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.params.append({"request_id": request_id, **sampling_params})
        g = await self.policy.generate(prompt_ids, sampling_params.get("stop") or [],
                                       SamplingParams(max_tokens=sampling_params["max_tokens"]))
        return TokenOutput(token_ids=g.token_ids, log_probs=g.logprobs, stop_reason="completed")


def generate(tmp_path, labels, on_fork):
    import yaml
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    from tir_envs.trainers.verl import gateway as module

    tok = family_tokenizer("qwen3")
    tmp_path.mkdir(parents=True, exist_ok=True)
    loops = tmp_path / "loops.yaml"
    loops.write_text(yaml.safe_dump([{
        "name": "gateway_agent", "_target_": "tir_envs.trainers.verl.gateway.GatewayAgentLoop",
        "agent": "tests.test_verl_gateway:agent", "reward": "tests.test_verl_gateway:reward",
        "tasks": "tests.test_verl_gateway:TASKS", "renderer": "qwen3", "thinking": "on",
        "on_fork": on_fork}]))
    data = vw.parquet(tmp_path / "d.parquet", [
        {"data_source": "gateway", "agent_name": "gateway_agent",
         "prompt": [{"role": "user", "content": label}],
         "extra_info": {"index": i, "tir_task": label}} for i, label in enumerate(labels)])
    model = vw.model_dir(tmp_path, tok)
    config = vw.compose(model, loops, data, 2048, 2048)
    client = Client(ToolLoopPolicy(tok, resolve_renderer(tok, Codec(tok), "qwen3", "on")))
    results = []
    run = module.GatewayAgentLoop.run

    async def recording_run(self, *args, **kwargs):  # keep each loop's EpisodeResult
        try:
            return await run(self, *args, **kwargs)
        finally:
            results.append(self.result)
    module.GatewayAgentLoop.run = recording_run
    try:
        batch = vw.batch_from_parquet(config, data, AutoTokenizer.from_pretrained(model))
        out = asyncio.run(AgentLoopWorker(config, llm_client=client).generate_sequences(batch))
    finally:
        module.GatewayAgentLoop.run = run
    return out, results, client


def pop_match(results, row, index):
    for i, r in enumerate(results):
        seg = r.trajectories[index]
        if seg.prompt_ids == row["prompt_ids"] and seg.token_ids == row["response_ids"] \
                and seg.reward == row["reward"]:
            return results.pop(i)
    raise AssertionError("a verl row is no episode's gateway segment")


def same_segment(row, seg):
    assert row["prompt_ids"] == seg.prompt_ids and row["response_ids"] == seg.token_ids
    assert row["loss_mask"] == list(seg.loss_mask)
    assert row["logprobs"] == [float(x) for x in seg.logprobs]
    assert row["reward"] == seg.reward  # verl writes it on the last response token:
    assert row["reward_at"] == (len(seg.token_ids) - 1 if seg.reward else None)


def test_each_verl_row_is_its_gateway_segment(tmp_path):
    out, results, client = generate(tmp_path, ["a", "a", "b", "b"], "error")
    rows = vw.rows_of(out)
    assert len(rows) == len(results) == 4
    left = list(results)
    for row in rows:
        r = pop_match(left, row, 0)
        assert len(r.trajectories) == 1 and r.breaks == 0
        seg = r.trajectories[0]
        same_segment(row, seg)
        assert sum(seg.loss_mask) and 0 in seg.loss_mask
        assert all(lp == -0.25 for lp, m in zip(seg.logprobs, seg.loss_mask) if m)
    assert {row["reward"] for row in rows} == {0.0, 1.0}
    # one sticky request id per episode, three calls each (two tool calls, the answer)
    assert sorted(len([p for p in client.params if p["request_id"] == rid])
               for rid in {p["request_id"] for p in client.params}) == [3, 3, 3, 3]


def test_forks_are_refused_or_give_the_last_segment(tmp_path):
    with pytest.raises(ValueError, match="on_fork='last'"):
        generate(tmp_path / "error", ["drop"], "error")
    out, results, _ = generate(tmp_path / "last", ["drop", "drop"], "last")
    assert [len(r.trajectories) for r in results] == [3, 3]
    left = list(results)
    for row in vw.rows_of(out):
        same_segment(row, pop_match(left, row, -1).trajectories[-1])
    assert out.non_tensor_batch["gateway/dropped_segments"].tolist() == [2.0, 2.0]
