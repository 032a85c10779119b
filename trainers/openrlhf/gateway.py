"""OpenRLHF over an agent program: each sample is one gateway episode.

OpenRLHF's vLLM engine actor calls its agent executor's ``execute(prompt, label,
sampling_params, max_length, hf_tokenizer, llm_engine)`` once per sample (``n_samples_per_prompt``
times per prompt) and turns the returned dict into an ``Experience``.  ``GatewayAgentExecutor``
is that executor for ``async def agent(task, base_url, api_key)``: one ``Gateway`` per engine
actor, on the actor's own event loop, whose policy is OpenRLHF's engine itself
(``EnginePolicy``: token ids in, token ids and logprobs out, the gateway's stop strings kept in
the output and cut with ``cut_at_stop``, as the env path's ``_StopEngine`` does); the sampling
is OpenRLHF's (temperature, top_p, top_k; ``max_tokens`` per call: ``--rollout.max_new_tokens``,
or ``max_length`` without it).

The returned dict is the env path's, built from the episode's segment (``to_openrlhf``):
``observation_tokens`` = prompt ids + every token after them, ``action_ranges`` = the runs of
sampled tokens (mask 1), ``rollout_log_probs`` = the sampler's logprobs (0 on the prompt and
on what the gateway inserted; only when OpenRLHF asks for logprobs), ``reward`` and ``scores``
= the host's reward (``scores`` NaN for an agent that crashed or timed out, so
``--algo.dynamic_filtering_enable`` drops its group).

OpenRLHF groups samples by position (``rewards.reshape(-1, n_samples_per_prompt)``), one per
``execute``, so a forked episode (several segments) cannot give several samples: see
``tir_envs.trainers.common.gateway_segments`` (``on_fork``).  The label is the task key: ``tasks`` maps it
(a mapping or ``label -> task``), default the label itself.

Give OpenRLHF a file defining ``AgentExecutor`` with no arguments (``--train.agent_func_path``)::

    class AgentExecutor(GatewayAgentExecutor):
        def __init__(self):
            super().__init__(my_agent, my_reward, tasks=my_tasks, renderer="qwen3")
"""

from __future__ import annotations

import asyncio
import math
from copy import deepcopy
from typing import Any, Awaitable, Callable, Mapping

from openrlhf.utils.agent import AgentExecutorBase

from tir_envs.codec import Codec
from tir_envs.rollout.policy import Generation, SamplingParams
from tir_envs.rollout.stops import cut_at_stop
from tir_envs.trajectory import Trajectory
from tir_envs.trainers.common.gateway_segments import check_fork_rule, one_segment, task_for
from tir_envs.trainers.openrlhf.executor import output_logprobs


class EnginePolicy:
    """OpenRLHF's vLLM engine (``await engine.generate(ids, vllm_params)``) as a tir_envs
    ``Policy``; ``params``: OpenRLHF's sampling params, copied per call with the gateway's
    stops and token cap."""

    def __init__(self, engine: Any, tokenizer: Any, params: Any):
        self.engine, self.params = engine, params
        self.codec = Codec(tokenizer)
        self.eos_token_ids = [] if tokenizer.eos_token_id is None else [tokenizer.eos_token_id]

    async def generate(self, prompt_ids: list[int], stop: list[str],
                       sampling: SamplingParams) -> Generation:
        params = deepcopy(self.params)
        params.stop = list(stop)
        params.include_stop_str_in_output = True
        params.max_tokens = int(sampling.max_tokens)
        params.logprobs = 1 if params.logprobs is None else params.logprobs
        out = (await self.engine.generate(list(prompt_ids), params)).outputs[0]
        ids = [int(i) for i in out.token_ids]
        logprobs = output_logprobs(out, ids)
        cut = cut_at_stop(ids, self.codec.decode, stop, self.eos_token_ids, sampling.max_tokens)
        return Generation(ids[:cut.length], None if logprobs is None else logprobs[:cut.length],
                          cut.finish_reason, cut.stop_reason,
                          text=self.codec.decode(ids[:cut.length]))


def to_openrlhf(traj: Trajectory, prompt: Any, label: Any, want_logprobs: bool,
                **extra_logs: float) -> dict[str, Any]:
    """A segment as the dict ``MultiTurnAgentExecutor.execute`` returns (module docstring)."""
    p = len(traj.prompt_ids)
    ranges, start = [], None
    for i, m in enumerate(list(traj.loss_mask) + [0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            ranges.append((p + start, p + i))
            start = None
    reward = float(traj.reward)
    return {"prompt": prompt, "label": label, "images": None, "mm_train_inputs": None,
            "reward": reward, "scores": math.nan if traj.infra_failed else reward,
            "observation_tokens": list(traj.prompt_ids) + list(traj.token_ids),
            "action_ranges": ranges,
            "rollout_log_probs": ([0.0] * p + [float(x) for x in traj.logprobs]
                                  if want_logprobs else None),
            "truncated": bool(traj.truncated),
            "extra_logs": {"infra_failed": float(traj.infra_failed), **extra_logs}}


class GatewayAgentExecutor(AgentExecutorBase):
    """OpenRLHF's agent executor running ``agent`` through a gateway (module docstring).
    ``gateway_kwargs``: more ``Gateway`` arguments (``renderer``, ``thinking``, ...)."""

    def __init__(self, agent: Callable[..., Awaitable[Any]], reward: Any, *,
                 tasks: Mapping[Any, Any] | Callable[[Any], Any] | None = None,
                 on_fork: str = "error", timeout_s: float | None = None,
                 **gateway_kwargs: Any):
        if not callable(agent):
            raise TypeError("agent must be async def agent(task, base_url, api_key), got "
                            f"{type(agent).__name__}")
        self.agent, self.reward, self.tasks = agent, reward, tasks
        self.on_fork, self.timeout_s = check_fork_rule(on_fork), timeout_s
        self.gateway_kwargs = gateway_kwargs
        self.gateway: Any = None
        self.source: Any = None
        self._lock = asyncio.Lock()
        #: the EpisodeResult of each executed sample, in finish order
        self.results: list[Any] = []

    async def execute(self, prompt, label, sampling_params, max_length, hf_tokenizer, llm_engine,
                      images=None, **kwargs):
        await self._start(hf_tokenizer, llm_engine, sampling_params, max_length)
        result = await self.source.episode(task_for(self.tasks, label))
        self.results.append(result)
        traj, dropped = one_segment(result, self.on_fork, "OpenRLHF")
        return to_openrlhf(traj, prompt, label, sampling_params.logprobs is not None,
                           gateway_forks=float(result.breaks),
                           gateway_dropped_segments=float(dropped))

    async def aclose(self) -> None:
        if self.gateway is not None:
            await self.gateway.aclose()
            self.gateway = None

    async def _start(self, tokenizer: Any, engine: Any, params: Any, max_length: int) -> None:
        async with self._lock:
            if self.gateway is not None:
                return
            from tir_envs.gateway import AgentSource, Gateway

            top_k = getattr(params, "top_k", -1)
            sampling = SamplingParams(max_tokens=int(params.max_tokens or max_length),
                                      temperature=float(params.temperature),
                                      top_p=float(getattr(params, "top_p", 1.0)),
                                      top_k=-1 if top_k is None else int(top_k))
            gateway = Gateway(EnginePolicy(engine, tokenizer, params), tokenizer=tokenizer,
                              sampling=sampling, reward=self.reward, **self.gateway_kwargs)
            await gateway.start()
            self.source = AgentSource(gateway, self.agent, timeout_s=self.timeout_s)
            self.gateway = gateway
