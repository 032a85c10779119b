"""TRL's ``GRPOTrainer(rollout_func=...)`` over a ``tir/*`` env: each completion is one episode.

TRL (1.16.0) calls ``rollout_func(prompts, trainer)`` once per generation batch with the
prompt column of the batch's rows, each prompt repeated ``num_generations`` times, copies of a
prompt next to each other (TRL's ``RepeatSampler``); it wants one completion per entry, in the
same order, so groups stay contiguous.  Here each entry is a task label (the dataset's
``prompt`` column holds the label, since TRL passes the rollout function nothing else; the env
renders the real prompt, see ``tir_envs.trainers.trl.dataset``), and each completion is one episode run
by ``EpisodeRunner``.  The returned dict is the env's ledger as TRL consumes it:

* ``prompt_ids``: the env's prompt; ``completion_ids``: every token after it, actions and
  observations; ``logprobs``: the sampler's logprobs (0 on observations);
* ``env_mask``: the ledger's loss mask, which TRL multiplies into its completion mask (so tool
  output never enters the loss);
* extra keys, which TRL hands to reward functions as keyword arguments: ``env_reward`` (the
  episode reward; ``None`` for an infra-failed episode, which TRL then leaves out of its group's
  baseline and gives advantage 0, see ``env_reward``), ``tir_turn_rewards`` (each turn's
  reward, the outcome included in the last turn's: they sum to the episode reward),
  ``tir_token_rewards``, and the flags ``tir_infra_failed``, ``tir_unfinished``,
  ``tir_drift``, ``tir_empty``.

TRL decides "truncated" by the completion's last token (not EOS or pad): an episode that ends
on a stop string (``</answer>``) or an observation counts as truncated, which only matters with
``mask_truncated_completions=True`` (off by default; keep it off).  TRL does not cut completions
on this path: the env's own budget (``max_total_tokens``) bounds each episode, and each action
is capped at ``max_completion_length``.  A completion needs at least one token for TRL, so an
episode with none gets one pad token with mask 0 (flagged ``tir_empty``).

Generation backends (``generate=``): ``"transformers"`` (the trainer's own model through
``HFPolicy``, the CPU path), ``"vllm"`` (TRL's own vLLM, server or colocated, through
``TRLVLLMPolicy``), or any tir_envs ``Policy`` (or a function ``trainer -> Policy``).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from tir_envs.trainers.common.versions import require

VERSIONS = ("1.16.0",)
require("trl", VERSIONS, "trl")

from tir_envs.rollout.policy import SamplingParams  # noqa: E402
from tir_envs.trajectory import Trajectory  # noqa: E402
from tir_envs.trainers.common.env_config import EnvConfig  # noqa: E402
from tir_envs.trainers.common.logs import ledger_flags, turn_rewards  # noqa: E402
from tir_envs.trainers.common.served import served  # noqa: E402

BACKENDS = ("transformers", "vllm")
RolloutFunc = Callable[[list, Any], dict]


def make_rollout_func(env_id: str, generate: Any = "transformers",
                      sampling: SamplingParams | None = None, **env_kwargs: Any) -> RolloutFunc:
    """A ``rollout_func`` for ``GRPOTrainer`` serving ``env_id`` made with ``env_kwargs`` (and
    the trainer's tokenizer).  ``sampling``: default from the trainer's ``GRPOConfig``
    (``temperature``, ``top_p``, ``top_k``, ``max_completion_length`` per action)."""
    config = EnvConfig(env_id, env_kwargs)
    if isinstance(generate, str) and generate not in BACKENDS:
        raise ValueError(f"generate must be one of {list(BACKENDS)}, a tir_envs Policy, or a "
                         f"function trainer -> Policy; got {generate!r}")
    policies: dict[int, Any] = {}

    def rollout_func(prompts: list, trainer: Any) -> dict[str, list]:
        tokenizer = text_tokenizer(trainer.processing_class)
        env = served(config, tokenizer)
        tasks = [env.task(prompt_label(p)) for p in prompts]
        key = id(trainer)
        if key not in policies:
            policies[key] = trainer_policy(generate, trainer, tokenizer)
        policy, params = policies[key], sampling or config_sampling(trainer.args)
        rounds = getattr(policy, "rounds", None)
        if rounds is None:
            trajs = env.run_batch(policy, tasks, sampling=params)
        else:  # server mode, several ranks: this thread drives the rounds (tir_envs.trainers.trl.vllm)
            trajs = rounds.drive(len(tasks), lambda: env.submit_batch(
                policy, tasks, on_done=rounds.episode_done, sampling=params))
        return to_trl(trajs, tokenizer.pad_token_id)

    return rollout_func


def text_tokenizer(processing_class: Any) -> Any:
    """The tokenizer inside a processor (a multimodal ``ProcessorMixin`` holds it as
    ``.tokenizer``), or the processing class itself.  A tokenizer is never unwrapped: Mistral's
    ``MistralCommonBackend`` has a ``.tokenizer`` too (mistral-common's own object), which no
    env can take."""
    from transformers import ProcessorMixin

    if isinstance(processing_class, ProcessorMixin):
        return processing_class.tokenizer
    return processing_class


def to_trl(trajectories: Sequence[Trajectory], pad_token_id: int) -> dict[str, list]:
    """The ledgers as ``rollout_func``'s dict (see the module docstring)."""
    out: dict[str, list] = {k: [] for k in (
        "prompt_ids", "completion_ids", "logprobs", "env_mask", "env_reward", "tir_turn_rewards",
        "tir_token_rewards", "tir_infra_failed", "tir_unfinished", "tir_drift", "tir_empty")}
    for t in trajectories:
        ids, mask, logprobs = list(t.token_ids), list(t.loss_mask), list(t.logprobs)
        empty = not ids
        if empty:
            ids, mask, logprobs = [pad_token_id], [0], [0.0]
        flags = ledger_flags(t)
        out["prompt_ids"].append(list(t.prompt_ids))
        out["completion_ids"].append(ids)
        out["logprobs"].append(logprobs)
        out["env_mask"].append(mask)
        out["env_reward"].append(None if t.infra_failed else float(t.reward))
        out["tir_turn_rewards"].append(turn_rewards(t))
        out["tir_token_rewards"].append(list(t.token_rewards) if not empty else [0.0])
        out["tir_infra_failed"].append(float(t.infra_failed))
        out["tir_unfinished"].append(flags["unfinished"])
        out["tir_drift"].append(flags["drift"])
        out["tir_empty"].append(float(empty))
    return out


def env_reward(completions: list, env_reward: list, **kwargs: Any) -> list:
    """The reward function to pass with the rollout function: the env's episode reward.
    ``GRPOTrainer(reward_funcs=[env_reward], rollout_func=make_rollout_func(...))``."""
    return list(env_reward)


def prompt_label(prompt: Any) -> Any:
    """A dataset prompt is the task label (an id, or a whole task as JSON)."""
    if isinstance(prompt, list):  # a conversational row: the label is the last message's text
        prompt = prompt[-1]["content"]
    return prompt


def config_sampling(args: Any) -> SamplingParams:
    top_k = getattr(args, "top_k", None)
    return SamplingParams(max_tokens=int(args.max_completion_length),
                          temperature=float(args.temperature), top_p=float(args.top_p or 1.0),
                          top_k=-1 if not top_k else int(top_k))


def trainer_policy(generate: Any, trainer: Any, tokenizer: Any) -> Any:
    if generate == "transformers":
        from tir_envs.rollout.hf import HFPolicy
        return HFPolicy(trainer.accelerator.unwrap_model(trainer.model), tokenizer)
    if generate == "vllm":
        from tir_envs.trainers.trl.vllm import TRLVLLMPolicy
        return TRLVLLMPolicy(trainer, tokenizer)
    if callable(getattr(generate, "generate", None)):
        return generate
    if callable(generate):
        return generate(trainer)
    raise TypeError(f"generate must be one of {list(BACKENDS)}, a Policy or a function "
                    f"trainer -> Policy; got {type(generate).__name__}")
