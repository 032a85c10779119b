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

verl's worker stacks one output per input row and copies the row's non-tensor fields (its
GRPO ``uid``) positionally, so a forked episode (several segments) cannot give several samples
here either: ``on_fork`` (``tir_envs.trainers.common.gateway_segments``).  GRPO groups are then verl's
own: the ``rollout.n`` rows of a prompt share its ``uid``.

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
from tir_envs.trainers.common.gateway_segments import check_fork_rule, one_segment, task_for
from tir_envs.trainers.verl.policy import VerlServerPolicy


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
        self.on_fork = check_fork_rule(on_fork)
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

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
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
        traj, dropped = one_segment(self.result, self.on_fork, "verl")
        out = self.output(traj, None, policy,
                          want_logprobs=bool(sampling_params.get("logprobs")))
        out.extra_fields["reward_extra_info"].update(
            {"gateway/forks": float(self.result.breaks),
             "gateway/dropped_segments": float(dropped)})
        return out
