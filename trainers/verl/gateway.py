"""verl's agent loop over an agent program: each sample is one gateway episode.

verl (0.9.1) makes one agent loop per sample and calls ``run(sampling_params,
**dataset_fields)``; ``GatewayAgentLoop`` runs ``async def agent(task, base_url, api_key)`` on
the row's task (``extra_info.tir_task``, as the env path's rows) against a ``Gateway`` whose
policy is verl's own server manager through the env path's ``VerlServerPolicy`` (one sticky
request id per episode, the gateway's stop strings kept in the output and cut, each action's
weights version), with verl's sampling (its ``sampling_params`` as they are; the token cap per
call is ``max_action_tokens``, default ``response_length``).  The gateway lives for the
episode: verl's loop objects do too.

The episode's segment becomes verl's sample through the env path's own
``TIRAgentLoop.output``: ``prompt_ids``, ``response_ids`` through the last sampled token,
``response_mask`` = the segment's loss mask, ``response_logprobs``, ``reward_score`` = the
host's reward (written on the last response token as ``rm_scores``), the same shape checks
(``tir/overlong``).  A gateway segment has no env tools, so the tool counts are empty.

A forked episode (several segments) trains every segment with ``on_fork="all"`` on verl's v1
trainer (``trainer.use_v1``, verl 0.9.1's default): its TransferQueue worker
(``AgentLoopWorkerTQ``) takes a list of outputs from one agent loop, keys them
``{uid}_{session}_{index}``, copies the last one's reward to the others, and its GRPO
(``compute_advantage_for_multi_trajectories``) computes the group's advantages from each
session's **last** output only and gives that advantage to every output of the session: one
sample per episode in the group statistics, every segment trained with its episode's
advantage.  The segments are returned in ledger order, so the last is the one holding the final
answer.  verl's legacy worker (``trainer.use_v1=False``) stacks one output per input row and
copies the row's non-tensor fields (its GRPO ``uid``) positionally, so there ``on_fork`` is
``error`` or ``last`` (``tir_envs.trainers.common.gateway_segments``); ``all`` is refused at start.

The agent-loop YAML entry names the pieces as import paths::

    - name: gateway_agent
      _target_: tir_envs.trainers.verl.gateway.GatewayAgentLoop
      agent: my_package.agents:solve          # async def solve(task, base_url, api_key)
      reward: my_package.rewards:grade        # f(task, conversation) or a Reward
      tasks: my_package.tasks:BY_ID           # optional: label -> task (mapping or function)
      renderer: qwen3                         # optional Gateway arguments
"""

from __future__ import annotations

from typing import Any, Mapping

from tir_envs.trainers.verl.agent_loop import TIRAgentLoop, row_label, plain

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput

from tir_envs.codec import Codec
from tir_envs.rollout.policy import SamplingParams
from tir_envs.user_modules import resolve
from tir_envs.trainers.common.env_config import ConfigError
from tir_envs.trainers.common.gateway_segments import (check_fork_rule, one_segment, own_segments,
                                              task_for)
from tir_envs.trainers.verl.policy import VerlServerPolicy


#: verl's rules for a forked episode: refuse it, train its last segment, or every segment
FORK_RULES = ("error", "last", "all")


def check_verl_fork_rule(on_fork: str, config: Any) -> str:
    """``on_fork``, refused where this verl config cannot take it (``all`` needs the v1
    trainer: module docstring)."""
    check_fork_rule(on_fork, FORK_RULES)
    if on_fork == "all" and not config.trainer.get("use_v1", False):
        raise ConfigError("on_fork: all gives several samples per episode, which only verl's v1 "
                          "trainer takes (trainer.use_v1=True, its TransferQueue agent loop); "
                          "with trainer.use_v1=False use on_fork: last or error")
    return on_fork


class _NoEnv:
    """What ``TIRAgentLoop.output`` reads of an env, for a gateway episode: no tools, no
    total-token budget (the agent's client decides how long an episode runs)."""

    tool_names: tuple[str, ...] = ()
    max_total_tokens = "no fixed number of"


def _load(spec: Any, what: str) -> Any:
    return resolve(spec, what) if isinstance(spec, str) else spec


class GatewayAgentLoop(TIRAgentLoop):
    """The agent loop for an agent program (see the module docstring)."""

    def __init__(self, *args: Any, agent: Any = None, reward: Any = None, tasks: Any = None,
                 on_fork: str = "error", max_action_tokens: int | None = None,
                 timeout_s: float | None = None, tools: Any = None, name: str | None = None,
                 **kwargs: Any):
        gateway_keys = {k: kwargs.pop(k) for k in list(kwargs)
                        if k in ("renderer", "thinking", "model", "aliases", "render")}
        AgentLoopBase.__init__(self, *args, **kwargs)
        if agent is None or reward is None:
            raise ConfigError("GatewayAgentLoop needs `agent` and `reward` in its agent-loop "
                              "YAML entry (import paths 'package.module:name')")
        self.agent = _load(agent, "agent")
        self.reward = _load(reward, "reward")
        self.tasks = _load(tasks, "tasks")
        self.on_fork = check_verl_fork_rule(on_fork, self.config)
        self.timeout_s = timeout_s
        self.gateway_kwargs = plain(gateway_keys)
        self.env = _NoEnv()
        self.prompt_length = int(self.rollout_config.prompt_length)
        self.response_length = int(self.rollout_config.response_length)
        self.backend = str(self.rollout_config.name)
        if max_action_tokens is not None and int(max_action_tokens) < 1:
            raise ConfigError(f"max_action_tokens must be >= 1, got {max_action_tokens!r}")
        self.max_action_tokens = min(self.response_length, int(max_action_tokens or
                                                               self.response_length))
        #: the episode's EpisodeResult, once run
        self.result: Any = None

    async def run(self, sampling_params: dict[str, Any],
                  **kwargs: Any) -> AgentLoopOutput | list[AgentLoopOutput]:
        from tir_envs.gateway import AgentSource, Gateway

        task = task_for(self.tasks, row_label(kwargs))
        eos = self.tokenizer.eos_token_id
        policy = VerlServerPolicy(self.server_manager, Codec(self.tokenizer), sampling_params,
                                  self.backend, [] if eos is None else [eos])
        sampling = SamplingParams(
            max_tokens=self.max_action_tokens,
            temperature=float(sampling_params.get("temperature", 1.0)),
            top_p=float(sampling_params.get("top_p", 1.0)),
            top_k=int(sampling_params.get("top_k", -1) or -1))
        async with Gateway(policy, tokenizer=self.tokenizer, sampling=sampling,
                           reward=self.reward, **self.gateway_kwargs) as gateway:
            self.result = await AgentSource(gateway, self.agent,
                                            timeout_s=self.timeout_s).episode(task)
        want = bool(sampling_params.get("logprobs"))
        if self.on_fork == "all":  # every segment, for the v1 worker (module docstring)
            segments = own_segments(self.result, "verl")
            outs = [self.output(t, None, policy, want_logprobs=want) for t in segments]
            dropped = len(self.result.trajectories) - len(segments)
        else:
            traj, dropped = one_segment(self.result, self.on_fork, "verl")
            outs = [self.output(traj, None, policy, want_logprobs=want)]
        for out in outs:
            out.extra_fields["reward_extra_info"].update(
                {"gateway/forks": float(self.result.breaks),
                 "gateway/dropped_segments": float(dropped)})
        return outs if self.on_fork == "all" else outs[0]
