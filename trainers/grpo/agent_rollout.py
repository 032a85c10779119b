"""GRPO on a black-box agent program: rollouts come from the gateway, not from an env.

``AgentGRPOTrainer`` is the bundled ``GRPOTrainer`` with one step replaced: ``_rollout`` runs
the user's agent function (``async def agent(task, base_url, api_key)``) through a
``tir_envs.gateway.Gateway`` over the trainer's own policy, via ``AgentSource.groups``.  What
the update receives is unchanged: per task, a ``Group`` of ``Trajectory`` objects (the
episodes' segment ledgers: sampled tokens mask 1 with the sampler's logprobs, every token the
gateway inserted mask 0, the host's reward on each).  Filtering, advantages, the loss and the
metrics are the trainer's own.

The gateway's HTTP server lives on an event loop in a background thread for the whole run
(clients keep one address); each step blocks on that loop until its episodes are finished.
Sampling is the run's (``rollout.max_tokens``, ``temperature``, ``top_p``, ``top_k``): the
gateway overrides whatever the agent's client asks for and records that it did.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Sequence

from tir_envs.rollout import SamplingParams
from tir_envs.trainers.common.background import BackgroundLoop
from tir_envs.trainers.grpo.config import GRPOConfig
from tir_envs.trainers.grpo.filtering import Group, mark_exclusions
from tir_envs.trainers.grpo.trainer import GRPOTrainer


class AgentGRPOTrainer(GRPOTrainer):
    """GRPO where each episode is one run of ``agent`` through a gateway (module docstring).

    Args:
      config: the GRPO config (its ``env`` section is not used: the agent is the env).
      agent: ``async def agent(task, base_url, api_key) -> answer | None``.
      tasks: what each agent run receives (any objects; dicts or ``Task``).
      reward: the host's reward: a ``tir_envs.rewards.Reward`` or ``f(task, conversation)``.
      renderer: the model family (a name such as ``"qwen3"`` or a ``ChatRenderer``); ``None``
        detects it from the tokenizer.
      concurrency: agent runs at once (every episode of a step when ``None``).
      gateway_kwargs: more ``Gateway`` arguments (``thinking``, ``model``, ``aliases``...).
    """

    def __init__(self, config: GRPOConfig, agent: Callable[..., Awaitable[Any]],
                 tasks: Sequence[Any], reward: Any, *, renderer: Any = None,
                 concurrency: int | None = None, model=None, tokenizer=None, policy=None,
                 **gateway_kwargs: Any):
        from tir_envs.gateway import AgentSource, Gateway

        super().__init__(config, model=model, tokenizer=tokenizer, env=lambda: None,
                         tasks=tasks, policy=policy)
        r = config.rollout
        # no fixed seed: one seed would make every generate call draw the same noise; the
        # sampler draws from torch's global stream, seeded by train.seed
        sampling = SamplingParams(max_tokens=r.max_tokens, temperature=r.temperature,
                                  top_p=r.top_p, top_k=r.top_k)
        self.background = BackgroundLoop()
        self.gateway = Gateway(self.policy, tokenizer=self.tokenizer, renderer=renderer,
                               sampling=sampling, reward=reward, **gateway_kwargs)
        self.background.run(self.gateway.start())
        width = concurrency or r.tasks_per_step * r.samples_per_task
        self.source = AgentSource(self.gateway, agent, concurrency=width,
                                  timeout_s=r.episode_timeout_s)
        #: per step: episodes run and prefix breaks (forks) among them
        self.episode_stats: list[dict[str, Any]] = []

    def _rollout(self, n: int) -> list[Group]:
        """``n`` fresh tasks, ``samples_per_task`` agent runs each, through the gateway."""
        c = self.config
        self.model.eval()
        self._round += 1
        results = self.background.run(self.source.collect(
            [t for t in self.tasks.next(n) for _ in range(c.rollout.samples_per_task)]))
        g = c.rollout.samples_per_task
        self._generated += sum(sum(t.loss_mask) for r in results for t in r.trajectories)
        self.episode_stats.append({"episodes": len(results),
                                   "breaks": sum(r.breaks for r in results),
                                   "failed": sum(r.error is not None for r in results),
                                   **({"first_error": next(r.error for r in results if r.error)}
                                      if any(r.error for r in results) else {})})
        return [mark_exclusions(Group(f"{self.step}:{i // g}",
                                      [t for r in results[i:i + g] for t in r.trajectories]),
                                c.algorithm.mask_void, c.algorithm.mask_infra)
                for i in range(0, len(results), g)]

    def close(self) -> None:
        try:
            self.background.run(self.gateway.aclose())
        finally:
            self.background.close()
            super().close()
