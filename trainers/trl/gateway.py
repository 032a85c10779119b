"""TRL's ``GRPOTrainer(rollout_func=...)`` over an agent program: each completion is one
gateway episode of ``async def agent(task, base_url, api_key)``.

The seam is the env path's (``tir_envs.trainers.trl.rollout``): TRL calls ``rollout_func(prompts,
trainer)`` with each prompt repeated ``num_generations`` times, copies side by side, and wants
one completion per entry in the same order.  Here each entry is a task label; the agent runs
against a ``tir_envs.gateway.Gateway`` whose policy is the trainer's own generation path (the
same ``HFPolicy`` / ``TRLVLLMPolicy`` / user ``Policy`` the env path uses), with the run's
sampling (``GRPOConfig``'s temperature, top_p, top_k, ``max_completion_length`` per call).
Each episode's segment is turned into TRL's row by the env path's own ``to_trl``: prompt ids,
every token after them (sampled mask 1 with the sampler's logprobs, inserted mask 0 in
``env_mask``), ``env_reward`` the host's reward (``None`` for an agent that crashed or timed
out, which TRL leaves out of its group's baseline).

Forks.  TRL groups rows by position (``rewards.view(-1, num_generations)``) and zips them with
its prompts, so a rollout must return exactly one row per entry: an episode the client forked
(it rewrote history, so the gateway split it into several segments) has no place for its
other segments.  ``on_fork="error"`` (default) stops with the episodes named, before TRL sees
the batch; ``on_fork="last"`` trains on each episode's last segment (the final answer's) and
counts the segments left out in ``tir_dropped_segments``.  Agents that send history back as
they got it never fork (docs/gateway.md); the bundled GRPO trainer and verl take
every segment.

Several training processes with ``vllm_mode="server"`` (generation in rounds through the main
process, ``tir_envs.trainers.trl.server_rounds``) are refused: the rounds are not wired to gateway
episodes.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Mapping

from tir_envs.rollout.policy import SamplingParams
from tir_envs.trainers.common.background import BackgroundLoop
from tir_envs.trainers.common.gateway_segments import check_fork_rule, one_segment, task_for
from tir_envs.trainers.trl.rollout import prompt_label, trainer_policy, config_sampling, text_tokenizer, to_trl


class GatewayRollout:
    """A ``rollout_func`` running ``agent`` through a gateway (see the module docstring).

    ``reward``: the host's reward (a ``tir_envs.rewards.Reward`` or ``f(task, conversation)``);
    ``tasks``: a label's task (a mapping or ``label -> task``; default: the label itself);
    ``generate``: as ``make_rollout_func``'s; ``gateway_kwargs``: more ``Gateway`` arguments
    (``renderer``, ``thinking``, ...).  ``close()`` stops the gateway.
    """

    def __init__(self, agent: Callable[..., Awaitable[Any]], reward: Any, *,
                 tasks: Mapping[Any, Any] | Callable[[Any], Any] | None = None,
                 generate: Any = "transformers", sampling: SamplingParams | None = None,
                 on_fork: str = "error", concurrency: int = 64, timeout_s: float | None = None,
                 **gateway_kwargs: Any):
        check_fork_rule(on_fork)
        if not callable(agent):
            raise TypeError("agent must be async def agent(task, base_url, api_key), got "
                            f"{type(agent).__name__}")
        self.agent, self.reward, self.tasks = agent, reward, tasks
        self.generate, self.sampling, self.on_fork = generate, sampling, on_fork
        self.concurrency, self.timeout_s = concurrency, timeout_s
        self.gateway_kwargs = gateway_kwargs
        self.background: BackgroundLoop | None = None
        self.gateway: Any = None
        self.source: Any = None
        self._trainer_id: int | None = None
        #: every EpisodeResult of the last call, in prompt order
        self.last_results: list[Any] = []

    def __call__(self, prompts: list, trainer: Any) -> dict[str, list]:
        tokenizer = text_tokenizer(trainer.processing_class)
        self._start(trainer, tokenizer)
        tasks = [task_for(self.tasks, prompt_label(p)) for p in prompts]
        results = self.background.run(self.source.collect(tasks))
        self.last_results = results
        rows, dropped = self._rows(results)
        out = to_trl(rows, tokenizer.pad_token_id)
        out["tir_dropped_segments"] = [float(d) for d in dropped]
        out["tir_forks"] = [float(r.breaks) for r in results]
        return out

    def close(self) -> None:
        if self.background is None:
            return
        try:
            self.background.run(self.gateway.aclose())
        finally:
            self.background.close()
            self.background = None

    def _start(self, trainer: Any, tokenizer: Any) -> None:
        """The gateway over the trainer's generation path, made on the first call."""
        if self.background is not None:
            if self._trainer_id != id(trainer):
                raise ValueError("this rollout function already serves another trainer; make "
                                 "one GatewayRollout per GRPOTrainer")
            return
        from tir_envs.gateway import AgentSource, Gateway

        policy = trainer_policy(self.generate, trainer, tokenizer)
        if getattr(policy, "rounds", None) is not None:
            raise ValueError("gateway rollouts do not run with vllm_mode='server' on several "
                             "processes yet; use vllm_mode='colocate' or one process")
        gateway = Gateway(policy, tokenizer=tokenizer,
                          sampling=self.sampling or config_sampling(trainer.args),
                          reward=self.reward, **self.gateway_kwargs)
        background = BackgroundLoop()
        try:
            background.run(gateway.start())
        except BaseException:
            background.close()
            raise
        self.background, self.gateway = background, gateway
        self.source = AgentSource(self.gateway, self.agent, concurrency=self.concurrency,
                                  timeout_s=self.timeout_s)
        self._trainer_id = id(trainer)


    def _rows(self, results: list) -> tuple[list, list[int]]:
        """One trajectory per episode (``tir_envs.trainers.common.gateway_segments``)."""
        picked = [one_segment(r, self.on_fork, "TRL") for r in results]
        return [t for t, _ in picked], [d for _, d in picked]


def make_gateway_rollout_func(agent: Callable[..., Awaitable[Any]], reward: Any,
                              **kwargs: Any) -> GatewayRollout:
    """``GRPOTrainer(reward_funcs=[env_reward], rollout_func=make_gateway_rollout_func(agent,
    reward, tasks=...))``: see ``GatewayRollout``."""
    return GatewayRollout(agent, reward, **kwargs)
