"""OpenRLHF consumes gateway episodes through its agent-executor seam.

``GatewayAgentExecutor.execute`` is called as OpenRLHF's vLLM engine actor calls it (prompt,
label, vLLM-like sampling params with logprobs, ``max_length``, the tokenizer, the engine),
``n_samples_per_prompt`` times per prompt at once.  The engine answers like OpenRLHF's
(``outputs[0].token_ids``, per-token logprob dicts) from ``ToolLoopPolicy`` on Qwen3, and the
agent is the real ``openai`` SDK tool loop.  Each returned sample must be its episode's gateway
segment token for token: ``observation_tokens`` = prompt + segment ids, ``action_ranges`` =
the sampled runs (mask 1), ``rollout_log_probs`` = the sampler's logprobs (0 elsewhere),
``reward`` / ``scores`` = the host's reward.  A forking agent is refused by default (OpenRLHF's
fixed groups) and gives its last segment with ``on_fork="last"``.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass
from types import SimpleNamespace

import pytest

pytest.importorskip("openrlhf")
pytest.importorskip("openai", reason="the gateway extra is not installed")

from tests.gateway_agents import chat_agent  # noqa: E402
from tests.gateway_helpers import ToolLoopPolicy  # noqa: E402
from tir_envs.chat import resolve_renderer  # noqa: E402
from tir_envs.codec import Codec  # noqa: E402
from tir_envs.rollout.policy import SamplingParams  # noqa: E402
from tir_envs.tokenizer import family_tokenizer  # noqa: E402
from tir_envs.trainers.openrlhf.gateway import GatewayAgentExecutor  # noqa: E402

N = 2  # n_samples_per_prompt
TASKS = {"a": {"id": "a", "keep": True}, "b": {"id": "b", "keep": True},
         "drop": {"id": "drop", "keep": False}}


async def agent(task, base_url, api_key):
    return await chat_agent(base_url, api_key, keep_reasoning=task["keep"])


@dataclass
class Sampling:
    """The fields of vLLM's ``SamplingParams`` that OpenRLHF and the adapter set."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int | None = 256
    stop: list | None = None
    include_stop_str_in_output: bool = False
    logprobs: int | None = 1
    skip_special_tokens: bool = False


class Engine:
    """OpenRLHF's engine surface: ``generate(ids, params)`` -> a vLLM ``RequestOutput``-like
    object, the scripted policy's tokens with per-token logprob dicts."""

    def __init__(self, policy):
        self.policy, self.params = policy, []

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        self.params.append(sampling_params)
        g = await self.policy.generate(prompt_token_ids, sampling_params.stop,
                                       SamplingParams(max_tokens=sampling_params.max_tokens))
        steps = [{t: SimpleNamespace(logprob=lp)} for t, lp in zip(g.token_ids, g.logprobs)]
        out = SimpleNamespace(token_ids=g.token_ids, logprobs=steps, finish_reason="stop",
                              text=self.policy.tokenizer.decode(g.token_ids))
        return SimpleNamespace(outputs=[out])


def run(labels, on_fork):
    tok = family_tokenizer("qwen3")
    renderer = resolve_renderer(tok, Codec(tok), "qwen3", "on")
    engine = Engine(ToolLoopPolicy(tok, renderer, calls=2))
    flips = itertools.count()
    executor = GatewayAgentExecutor(agent, lambda task, conv: float(next(flips) % 2),
                                    tasks=TASKS, renderer=renderer, on_fork=on_fork)

    async def main():
        try:
            # as OpenRLHF's generate_responses: N executes per prompt, gathered
            return await asyncio.gather(*(
                executor.execute(prompt=label, label=label, sampling_params=Sampling(),
                                 max_length=4096, hf_tokenizer=tok, llm_engine=engine)
                for label in labels for _ in range(N)), return_exceptions=True)
        finally:
            await executor.aclose()
    return asyncio.run(main()), executor, engine


def pop_match(results, sample, index):
    """The (first unused) episode whose segment ``index`` has the sample's ids and reward."""
    for i, r in enumerate(results):
        seg = r.trajectories[index]
        if seg.prompt_ids + seg.token_ids == sample["observation_tokens"] and \
                seg.reward == sample["reward"]:
            return results.pop(i)
    raise AssertionError("a sample is no episode's gateway segment")


def same_segment(sample, seg):
    p = len(seg.prompt_ids)
    assert sample["observation_tokens"] == seg.prompt_ids + seg.token_ids
    mask = [0] * len(sample["observation_tokens"])
    for a, b in sample["action_ranges"]:
        mask[a:b] = [1] * (b - a)
    assert mask[:p] == [0] * p and mask[p:] == list(seg.loss_mask)
    assert sample["rollout_log_probs"] == [0.0] * p + [float(x) for x in seg.logprobs]
    assert sample["reward"] == sample["scores"] == seg.reward


def test_each_openrlhf_sample_is_its_gateway_segment():
    samples, executor, engine = run(["a", "b"], "error")
    assert not [s for s in samples if isinstance(s, BaseException)]
    by_task = {}
    for r in executor.results:
        by_task.setdefault(r.task["id"], []).append(r)
    assert sorted(len(v) for v in by_task.values()) == [N, N]
    left = list(executor.results)
    for sample in samples:  # each sample is one episode's segment, each episode used once
        r = pop_match(left, sample, -1)
        assert len(r.trajectories) == 1 and r.breaks == 0 and r.task["id"] == sample["label"]
        seg = r.trajectories[0]
        same_segment(sample, seg)
        assert sum(seg.loss_mask) and 0 in seg.loss_mask and len(sample["action_ranges"]) == 3
        assert all(lp == -0.25 for lp, m in zip(seg.logprobs, seg.loss_mask) if m)
    assert {s["reward"] for s in samples} == {0.0, 1.0}
    # each call: a copy of OpenRLHF's params with the gateway's stops kept in the output
    assert all(p.include_stop_str_in_output and p.logprobs == 1 and p.max_tokens == 256
               for p in engine.params)
    assert len({id(p) for p in engine.params}) == len(engine.params) == 2 * N * 3


def test_forks_are_refused_or_give_the_last_segment():
    samples, executor, _ = run(["drop"], "error")
    assert all(isinstance(s, ValueError) and "on_fork='last'" in str(s) for s in samples)
    samples, executor, _ = run(["drop"], "last")
    assert [len(r.trajectories) for r in executor.results] == [3, 3]
    left = list(executor.results)
    for sample in samples:
        r = pop_match(left, sample, -1)
        same_segment(sample, r.trajectories[-1])
        assert sample["extra_logs"]["gateway_dropped_segments"] == 2.0
        assert sample["extra_logs"]["gateway_forks"] == 2.0
