"""verl's agent loop over a ``tir/*`` env: each sample is one ``EpisodeRunner`` episode.

verl (0.9.1) runs every sample of a batch through ``AgentLoopBase.run(sampling_params,
**dataset_fields)`` in its ``AgentLoopWorker``, which pads what ``run`` returns to
``rollout.prompt_length`` / ``rollout.response_length`` and stacks the batch.  This loop:

* finds the task from the row's label (``extra_info.tir_task``, written by
  ``python -m tir_envs.trainers.verl.dataset``; a task id or a whole task as JSON);
* runs the episode with ``EpisodeRunner`` (reset, the env's stops and token budget, step,
  failures kept and flagged) and verl's server manager as the policy (``VerlServerPolicy``);
* returns the env's ledger: ``prompt_ids`` = the prompt, ``response_ids`` = every token after
  it (actions and observations) through the last policy token, ``response_mask`` = the loss mask, ``response_logprobs`` =
  the sampler's logprobs (0 on observations), ``reward_score`` = the episode reward (verl puts
  it on the last response token as ``rm_scores``, which its trainer then uses instead of a
  reward function), per-turn rewards (the outcome included in the last turn's) in
  ``extra_fields["turn_scores"]``, the ledger's
  per-token rewards in ``extra_fields["tir_token_rewards"]`` and the episode's numbers and flags
  (``tir/infra_failed``, ``tir/unfinished``, ``tir/drift``, ``tir/overlong``, tool counts, ...)
  in ``extra_fields["reward_extra_info"]``, which verl turns into per-sample batch columns
  (the same keys for every env; calls per tool go in ``extra_fields["tir_tool_calls"]``);
  the weights versions that sampled the episode (the server's ``global_steps``, see
  ``policy.py``) in ``extra_fields["min_global_steps"]`` / ``["max_global_steps"]``, the fields
  verl's own agent loops fill and its async trainers read (the v1 worker's replay-buffer tags,
  the fully-async trainer's staleness metrics); the ledger has them per action
  (``trajectory.metadata["policy_versions"]``).

An episode that ends on env tokens (the token budget cut an observation and ended it) is
returned through its last policy token: verl writes the reward on the last response token,
and GAE and REINFORCE++ skip a token whose mask is 0, so a reward written on an observation
token would be lost (the return 0 instead of the reward).  Nothing is lost by the cut: no
policy token follows those env tokens, and they carry no loss.

verl's ``ToolAgentLoop`` and its chat-template merging are not used: they re-render turns, so
their ids can differ from the env's.

A ledger longer than verl's shapes (``len(prompt) > rollout.prompt_length`` or ``len(response)
> rollout.response_length``) cannot be padded (verl pads, it never cuts): it is cut to fit, its
``response_mask`` is all zeros (no gradient from an episode verl cannot hold whole), its reward
is kept, and it is flagged ``tir/overlong`` = 1, with a warning naming the fix (set
``response_length`` >= the env's ``max_total_tokens`` minus the prompt, or lower the env's
``max_total_tokens``).  See docs/verl.md.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from tir_envs.trainers.common.versions import require

VERSIONS = ("0.9.1",)
require("verl", VERSIONS, "verl")

from omegaconf import DictConfig, OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import (  # noqa: E402
    AgentLoopBase, AgentLoopMetrics, AgentLoopOutput)

from tir_envs.rollout.policy import SamplingParams  # noqa: E402
from tir_envs.trajectory import Trajectory  # noqa: E402
from tir_envs.trainers.common.env_config import ConfigError, EnvConfig  # noqa: E402
from tir_envs.trainers.common.logs import episode_logs, ledger_flags, policy_end, turn_rewards  # noqa: E402
from tir_envs.trainers.common.served import ServedEnv, served  # noqa: E402
from tir_envs.trainers.verl.policy import VerlServerPolicy  # noqa: E402

log = logging.getLogger(__name__)
LABEL = "tir_task"
#: per-tool counts differ between envs, while verl needs the same ``reward_extra_info`` keys in
#: every row of a batch (a batch may mix agent loops): they go in their own column instead
TOOL_KEYS = "tir/tool_calls/"
_WARNED: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        log.warning(message)


def plain(value: Any) -> Any:
    """A Hydra/OmegaConf value as plain Python (YAML entries arrive as ``DictConfig``)."""
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig) else value


class TIRAgentLoop(AgentLoopBase):
    """The agent loop for any ``tir/*`` env (see the module docstring).

    ``env_id`` / ``env_kwargs``: from the agent-loop YAML entry (Hydra passes its keys here);
    without them, from ``TIR_ENV_ID`` / ``TIR_ENV_KWARGS`` or ``TIR_ENV_CONFIG``.
    ``max_action_tokens``: a cap on each generated action below ``response_length`` (a paper's
    max action length, e.g. VerlTool's 2048 under a 3072-token response); default none.
    ``tools`` and ``name`` (which verl's worker also passes) are not used: the env brings its
    own tools.
    """

    def __init__(self, *args: Any, env_id: str | None = None,
                 env_kwargs: Mapping[str, Any] | None = None, tools: Any = None,
                 name: str | None = None, max_action_tokens: int | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        config = (EnvConfig(env_id, plain(env_kwargs) or {}) if env_id
                  else EnvConfig.from_environ())
        self.env: ServedEnv = served(config, self.tokenizer)
        self.prompt_length = int(self.rollout_config.prompt_length)
        self.response_length = int(self.rollout_config.response_length)
        self.backend = str(self.rollout_config.name)
        if max_action_tokens is not None and int(max_action_tokens) < 1:
            raise ConfigError(f"max_action_tokens must be >= 1, got {max_action_tokens!r}")
        self.max_action_tokens = min(self.response_length, int(max_action_tokens or
                                                               self.response_length))

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        task = self.env.task(row_label(kwargs))
        eos = self.tokenizer.eos_token_id
        policy = VerlServerPolicy(self.server_manager, self.env.codec, sampling_params,
                                  self.backend, [] if eos is None else [eos])
        traj = await self.env.run(policy, task,
                                  sampling=SamplingParams(max_tokens=self.max_action_tokens))
        return self.output(traj, task, policy, want_logprobs=bool(sampling_params.get("logprobs")))

    def output(self, traj: Trajectory, task: Any, policy: VerlServerPolicy,
               want_logprobs: bool) -> AgentLoopOutput:
        prompt, response = list(traj.prompt_ids), list(traj.token_ids)
        mask, logprobs = list(traj.loss_mask), list(traj.logprobs)
        overlong = len(prompt) > self.prompt_length or len(response) > self.response_length
        if overlong:
            _warn_once("overlong", f"an episode of {traj.env_id} ({len(prompt)} prompt + "
                                   f"{len(response)} response tokens) does not fit verl's "
                                   f"prompt_length={self.prompt_length} / response_length="
                                   f"{self.response_length}: cut, masked out, flagged "
                                   "tir/overlong. Raise actor_rollout_ref.rollout.response_length"
                                   f" (the env allows {self.env.max_total_tokens} tokens in all) "
                                   "or lower the env's max_total_tokens")
            prompt, response = prompt[-self.prompt_length:], response[:self.response_length]
            mask, logprobs = [0] * len(response), logprobs[:len(response)]
        else:  # end on the last policy token, where verl writes the reward (see _tail)
            end = policy_end(mask)
            if 0 < end < len(response):
                response, mask, logprobs = response[:end], mask[:end], logprobs[:end]
        logs = episode_logs(traj, task, self.env.tool_names, **ledger_flags(traj),
                            overlong=float(overlong))
        per_tool = {k: logs.pop(k) for k in [k for k in logs if k.startswith(TOOL_KEYS)]}
        observations = sum(t.observation_span[1] > t.observation_span[0] for t in traj.turns)
        return AgentLoopOutput(
            prompt_ids=prompt, response_ids=response, response_mask=mask,
            response_logprobs=logprobs if want_logprobs else None,
            reward_score=float(traj.reward),
            num_turns=1 + len(traj.turns) + observations,
            metrics=AgentLoopMetrics(generate_sequences=policy.generate_s),
            extra_fields={"turn_scores": turn_rewards(traj),
                          "tool_rewards": [],
                          "tir_token_rewards": list(traj.token_rewards)[:len(response)],
                          "tir_tool_calls": per_tool, "reward_extra_info": logs,
                          "min_global_steps": policy.oldest,
                          "max_global_steps": policy.newest})


def row_label(fields: Mapping[str, Any]) -> Any:
    """The row's task label: ``extra_info.tir_task`` (or a top-level ``tir_task`` column)."""
    extra = fields.get("extra_info") or {}
    label = fields.get(LABEL, extra.get(LABEL) if isinstance(extra, Mapping) else None)
    if label is None:
        raise ConfigError(f"the dataset row has no '{LABEL}' (in extra_info): write the verl "
                          "dataset with `python -m tir_envs.trainers.verl.dataset --env ... --out "
                          "train.parquet` so each row names its task")
    return label
