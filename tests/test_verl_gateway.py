"""verl consumes gateway episodes through its agent-loop seam.

verl's own ``AgentLoopWorker.generate_sequences`` (a Parquet batch read by verl's
``RLHFDataset``, the agent-loop YAML, verl's padding and stacking) runs ``GatewayAgentLoop``
on each row: the real ``openai`` SDK tool loop against a gateway over verl's LLM client
(``VerlServerPolicy``), the client answering from ``ToolLoopPolicy`` on Qwen3 (thinking on).
Each row of verl's batch must be its episode's gateway segment token for token: prompt ids,
response ids, ``response_mask`` (the segment's loss mask), ``rollout_log_probs`` and the host's
reward (``rm_scores``).  A forking agent is refused by default (verl's legacy worker stacks
one sample per row) and gives its last segment with ``on_fork="last"``; ``on_fork="all"``
gives every segment, as verl's v1 worker takes them, and verl's own v1 GRPO gives each the
advantage of its episode.

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


def generate(tmp_path, labels, on_fork, adapt=None):
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
            out = await run(self, *args, **kwargs)
            return adapt(out) if adapt else out
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


def test_forks_are_refused_or_every_segment_trains_with_its_episodes_advantage(tmp_path):
    """A fork is refused by default.  ``on_fork="all"``: the loop returns one verl output per
    segment, each its segment token for token; verl's v1 GRPO
    (``compute_advantage_for_multi_trajectories``, keys ``{uid}_{session}_{index}`` as its
    TransferQueue worker writes them) computes the group from each episode's last output and
    gives every segment its episode's advantage.  (The legacy worker run here stacks one output
    a row: it is given the last, what ``on_fork="last"`` gives.)"""
    import torch
    from verl import DataProto
    from verl.trainer.ppo import core_algos
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    with pytest.raises(ValueError, match="on_fork='last'"):
        generate(tmp_path / "error", ["drop"], "error")
    lists = []

    def last_of(outs):
        lists.append(outs)
        return outs[-1]
    out, results, _ = generate(tmp_path / "all", ["drop", "drop"], "all", adapt=last_of)
    assert [len(r.trajectories) for r in results] == [3, 3] == [len(o) for o in lists]
    left = list(results)
    for row in vw.rows_of(out):
        same_segment(row, pop_match(left, row, -1).trajectories[-1])
    for outs in lists:  # every output is its segment (the episodes differ by their reward)
        r = next(r for r in results if r.trajectories[-1].prompt_ids == outs[-1].prompt_ids
                 and r.reward == outs[-1].reward_score)
        for o, seg in zip(outs, r.trajectories):
            assert o.prompt_ids == seg.prompt_ids and o.response_ids == seg.token_ids
            assert o.response_mask == list(seg.loss_mask) and o.reward_score == r.reward
    rows = [o for outs in lists for o in outs]
    keys = [f"u_{s}_{i}" for s, outs in enumerate(lists) for i in range(len(outs))]
    assert sorted(outs[-1].reward_score for outs in lists) == [0.0, 1.0]
    mask = torch.zeros(len(rows), max(len(o.response_ids) for o in rows))
    scores = torch.zeros_like(mask)
    for r, o in enumerate(rows):
        mask[r, :len(o.response_mask)] = torch.tensor(o.response_mask, dtype=torch.float32)
        scores[r, len(o.response_ids) - 1] = o.reward_score
    data = DataProto.from_dict(tensors={"response_mask": mask, "token_level_rewards": scores},
                               non_tensors={"uid": ["u"] * len(rows)})
    adv = compute_advantage_for_multi_trajectories(
        data, keys, core_algos.AdvantageEstimator.GRPO).batch["advantages"]
    for r, o in enumerate(rows):
        values = set(adv[r][mask[r] > 0].tolist())
        assert len(values) == 1  # one advantage over the segment's sampled tokens
        assert (values.pop() > 0) == (o.reward_score == 1.0)


def test_every_segment_needs_verls_v1_trainer():
    from omegaconf import OmegaConf

    from tir_envs.trainers.common.env_config import ConfigError
    from tir_envs.trainers.verl.gateway import check_verl_fork_rule

    assert check_verl_fork_rule("all", OmegaConf.create({"trainer": {"use_v1": True}})) == "all"
    assert check_verl_fork_rule("last", OmegaConf.create({"trainer": {"use_v1": False}})) == "last"
    with pytest.raises(ConfigError, match="use_v1"):
        check_verl_fork_rule("all", OmegaConf.create({"trainer": {"use_v1": False}}))
