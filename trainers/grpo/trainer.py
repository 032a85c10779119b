"""The GRPO loop: roll out groups with the rollout engine, filter, score, update, sync, log.

One step:
  1. ``fill_batch``: ``tasks_per_step`` tasks × ``samples_per_task`` episodes through
     ``tir_envs.rollout.collect`` on the trainer's ``EpisodeRunner`` (its env pool stays warm
     across steps); void and infra-failed episodes are marked; groups outside the
     accuracy band are dropped and fresh tasks rolled out until the batch is full again.
  2. ``build_batch``: group-relative advantages (GRPO or Dr. GRPO) and padded tensors.
  3. ``update``: ``ppo_epochs`` passes over mini-batches; each mini-batch is one optimizer step,
     accumulated over micro-batches with the mini-batch's own loss divisor.
  4. Weight sync: ``HFPolicy`` generates from the trained model object itself (nothing to do);
     ``VLLMPolicy`` gets the new weights with ``update_weights``.
  5. Metrics to ``metrics.jsonl`` (+ TensorBoard / W&B); a checkpoint every ``save_every``.
"""

from __future__ import annotations

import functools
import math
import sys
import time
import weakref
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

import tir_envs.env_factory as envs
from tir_envs.rollout import EpisodeRunner, SamplingParams, collect
from tir_envs.trajectory import write_jsonl
from tir_envs.trainers.grpo.batch import TrainBatch, build_batch
from tir_envs.trainers.grpo.checkpoint import (latest_checkpoint, load_checkpoint, saved_config,
                                      save_checkpoint)
from tir_envs.trainers.grpo.config import GRPOConfig, context_budget, validate
from tir_envs.trainers.grpo.judging import JudgeMeter, judge_of, judge_pending
from tir_envs.trainers.grpo.filtering import (AccuracyBand, Group, RunningPassRate, fill_batch,
                                     mark_exclusions)
from tir_envs.trainers.grpo.resume import check_resume
from tir_envs.trainers.grpo.token_weights import TokenWeights
from tir_envs.trainers.grpo.logprobs import token_logprobs
from tir_envs.trainers.grpo.loss import default_denominator, policy_loss
from tir_envs.trainers.grpo.metrics import MetricsLogger, rollout_metrics
from tir_envs.trainers.grpo.modeling import (autocast, frozen_copy, import_object, load_model,
                                    load_tokenizer, resolve_device)
from tir_envs.trainers.grpo.tasks import TaskStream, load_tasks


def env_factory(env_id: str, kwargs: dict[str, Any], tokenizer) -> Callable[[], Any]:
    """A factory of fresh envs (``tir_envs.env_factory``): a registered id or
    ``"module:Class"``, built with the trainer's tokenizer unless ``kwargs`` names one (policy
    and env must share token ids)."""
    env = import_object(env_id) if ":" in env_id and not env_id.startswith("tir/") else env_id
    return envs.env_factory(env, kwargs, tokenizer)


class GRPOTrainer:
    """Train a policy on a ``tir/*`` env with GRPO (see the module docstring).

    Everything comes from ``config``; ``model``, ``tokenizer``, ``env`` (an id or a factory),
    ``tasks`` and ``policy`` may be passed in to override it (tests, notebooks).
    """

    def __init__(self, config: GRPOConfig, model=None, tokenizer=None,
                 env: str | Callable[[], Any] | None = None, tasks: Sequence[Any] | None = None,
                 policy=None):
        validate(config)
        c = self.config = config
        if c.train.resume:  # changed settings are refused before anything is loaded
            self._check_resume(latest_checkpoint(Path(c.train.output_dir) / "checkpoints"))
        torch.manual_seed(c.train.seed)
        self.device = resolve_device(c.model.device)
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(c.model)
        self.model = model if model is not None else load_model(c.model, self.tokenizer,
                                                                self.device)
        self.ref_model = frozen_copy(self.model) if c.algorithm.kl_coef > 0 else None
        factory = env if callable(env) else env_factory(env or c.env.id, c.env.kwargs,
                                                         self.tokenizer)
        self._sized_envs: weakref.WeakSet = weakref.WeakSet()  # every env made, for its budget
        self.make_env = lambda: self._sized(factory())
        self.tasks = TaskStream(tasks if tasks is not None else load_tasks(
            c.data.path, c.data.split, c.data.limit, self.make_env, c.data.loader,
            c.data.loader_kwargs), c.data.shuffle, c.train.seed)
        self.band = AccuracyBand.parse(c.algorithm.accuracy_band, c.algorithm.correct_threshold)
        self.pass_rates = RunningPassRate(c.algorithm.correct_threshold)
        self.token_weights = TokenWeights.parse(c.algorithm.token_weights)
        self.optimizer = torch.optim.AdamW(
            [p for p in self.model.parameters() if p.requires_grad], lr=c.optim.lr,
            betas=tuple(c.optim.betas), eps=c.optim.eps, weight_decay=c.optim.weight_decay)
        warmup = max(c.optim.warmup_steps, 0)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warmup) if warmup else 1.0)
        self.policy = policy if policy is not None else self._make_policy()
        # one env per concurrent episode, made on first use and kept warm across steps, so
        # sandboxes, database connections and indexes are not rebuilt every step
        self.runner = EpisodeRunner(self.make_env, episode_timeout_s=c.rollout.episode_timeout_s)
        self.pad_id = _pad_id(self.tokenizer)
        self.vocab = len(self.tokenizer)  # the ids the policy samples from (no padded rows)
        self.out_dir = Path(c.train.output_dir)
        self.step = 0
        self._generated, self._round = 0, 0  # per step: policy tokens, rollout rounds
        self.history: list[dict[str, Any]] = []
        self.judge_meter = JudgeMeter()
        if c.train.resume:
            self.resume()
        elif latest_checkpoint(self.out_dir / "checkpoints") is not None:
            say(f"train.resume=false: starting over in {self.out_dir} (its checkpoints are "
                "overwritten as the new run saves)")
        self.logger = MetricsLogger(self.out_dir, c.train.tensorboard, c.train.wandb_project,
                                    c.to_dict())
        self.logger.truncate_after(self.step)
        self._set_aside_dumps_after(self.step)

    # ------------------------------------------------------------------ setup
    def _make_policy(self):
        c = self.config
        if c.rollout.backend == "transformers":
            from tir_envs.rollout import HFPolicy
            return HFPolicy(self.model, self.tokenizer, max_batch_size=c.rollout.max_batch_size)
        from tir_envs.rollout import VLLMPolicy
        path = c.model.path
        if path is None or not Path(path).is_dir():  # vLLM loads from disk: write the weights
            path = str(Path(c.train.output_dir) / "initial_model")
            self.model.save_pretrained(path)
            self.tokenizer.save_pretrained(path)
        return VLLMPolicy(path, tokenizer=self.tokenizer, **c.rollout.vllm)

    def resume(self) -> bool:
        """Continue from the newest checkpoint under ``output_dir/checkpoints`` (if any), after
        checking that the settings are the checkpoint's (``resume.check_resume``)."""
        path = latest_checkpoint(self.out_dir / "checkpoints")
        if path is None:
            say(f"no checkpoint in {self.out_dir / 'checkpoints'}: starting fresh")
            return False
        extended = self._check_resume(path)
        state = load_checkpoint(path, self.model, self.optimizer, self.scheduler)
        self.step = int(state["step"])
        self.tasks.load_state_dict(state["tasks"])
        self.pass_rates.load_state_dict(state.get("pass_rates", {}))
        self.sync_weights()
        say(f"resuming from step {self.step} ({path}; train.resume=false starts over)")
        for line in extended:
            say(f"resuming with {line}")
        return True

    def _check_resume(self, path: Path | None) -> list[str]:
        """The allowed changes against checkpoint ``path``'s settings; refuses any other."""
        return [] if path is None else check_resume(saved_config(path), self.config.to_dict(),
                                                    path)

    def save(self) -> Path:
        return save_checkpoint(self.out_dir / "checkpoints", self.step, self.model,
                               self.optimizer, self.scheduler,
                               {"tasks": self.tasks.state_dict(),
                                "pass_rates": self.pass_rates.state_dict(),
                                "config": self.config.to_dict()},
                               tokenizer=self.tokenizer, keep_last=self.config.train.keep_last)

    # ------------------------------------------------------------------ loop
    def train(self, steps: int | None = None,
              on_step: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
        """Run until ``train.steps`` (or ``steps`` more); returns this call's metrics.
        ``on_step`` sees each step's metrics as soon as the step ends (the CLI's progress)."""
        target = self.config.train.steps if steps is None else self.step + steps
        every = self.config.train.save_every
        done: list[dict[str, Any]] = []
        if self.step >= target:
            say(f"nothing to do: the run finished at step {self.step} (raise train.steps or "
                "use a new output dir)")
            self.logger.close()
            return done
        try:
            while self.step < target:
                done.append(self.train_step())
                if on_step is not None:
                    on_step(done[-1])
                if every and self.step % every == 0:
                    self.save()
            if not every or self.step % every:
                self.save()
        finally:
            self.logger.close()
        return done

    def train_step(self) -> dict[str, Any]:
        c = self.config
        t0 = time.perf_counter()
        self._generated, self._round = 0, 0
        self._stamp_policy_version()
        budget = self._apply_context_budget()
        filled = fill_batch(self._rollout, c.rollout.tasks_per_step, self._keep_rule(),
                            c.algorithm.max_refill_rounds, c.algorithm.oversample)
        t1 = time.perf_counter()
        weigh = None
        if self.token_weights is not None:
            weigh = lambda t: self.token_weights.weights(t, self.tokenizer)  # noqa: E731
        batch = build_batch(filled.groups, self.pad_id, _scale(c.algorithm.advantage),
                            weigh=weigh)
        stats = self.update(batch) if batch is not None else {"skipped": 1.0}
        t2 = time.perf_counter()
        self.sync_weights()
        self.step += 1
        metrics = {**rollout_metrics(filled.sampled, c.algorithm.correct_threshold), **stats,
                   "groups/sampled": len(filled.sampled), "groups/kept": len(filled.groups),
                   "groups/fill": len(filled.groups) / c.rollout.tasks_per_step,
                   "refill_rounds": filled.rounds, "lr": self.scheduler.get_last_lr()[0],
                   **({"context_budget": budget} if budget is not None else {}),
                   "time/rollout_s": t1 - t0, "time/update_s": t2 - t1,
                   "time/step_s": time.perf_counter() - t0,
                   "throughput/rollout_tokens_per_s": self._generated / max(t1 - t0, 1e-9),
                   **self.judge_meter.step(judge_of(list(self._sized_envs)))}
        self.logger.log(self.step, metrics)
        if c.train.dump_rollouts:
            self._dump_rollouts(filled.sampled)
        self.history.append({"step": self.step, **metrics})
        return self.history[-1]

    def _set_aside_dumps_after(self, step: int) -> None:
        """On resume: rollout dumps of steps past the checkpoint belong to a run that is being
        redone, so they move to ``rollouts/superseded/`` (kept, never mixed with the steps the
        resumed run writes, which the viewer reads from ``rollouts/``)."""
        folder = self.out_dir / "rollouts"
        stale = [f for f in folder.glob("step_*.jsonl") if _dump_step(f) > step]
        if not stale:
            return
        aside = folder / "superseded"
        aside.mkdir(exist_ok=True)
        for f in stale:
            f.replace(aside / f.name)
        say(f"moved {len(stale)} rollout dump(s) of steps after {step} to {aside} (the resumed "
            "run writes those steps again)")

    def _dump_rollouts(self, groups: list[Group]) -> None:
        """Every trajectory of this step, kept or filtered out, for ``tir-envs view``."""
        folder = self.out_dir / "rollouts"
        folder.mkdir(parents=True, exist_ok=True)
        for g in groups:
            for t in g.trajectories:
                t.metadata.setdefault("step", self.step)
        write_jsonl((t for g in groups for t in g.trajectories),
                    folder / f"step_{self.step:05d}.jsonl")

    def _keep_rule(self) -> Callable[[Group], bool] | None:
        """The band test: on this group's accuracy, or (``pass_rate: running``) on its task's
        running pass rate, updated with this group first."""
        if self.band is None:
            return None
        if self.config.algorithm.pass_rate == "running":
            return lambda g: self.band.contains(self.pass_rates.update(g))
        return self.band.keep

    def _sized(self, env):
        """A new env, given the context budget of the current step (``_apply_context_budget``
        updates it on every env made so far, wherever the rollout keeps them)."""
        budget = context_budget(self.config.rollout.context_schedule, getattr(self, "step", 0))
        if budget is not None and env is not None:
            env.unwrapped.max_total_tokens = budget
        if env is not None:
            self._sized_envs.add(env)
        return env

    def _apply_context_budget(self) -> int | None:
        """Set the envs' context budget (``max_total_tokens``) from the schedule at this step."""
        budget = context_budget(self.config.rollout.context_schedule, self.step)
        if budget is not None:
            for env in list(self._sized_envs):
                env.unwrapped.max_total_tokens = budget
        return budget

    def episode_budget(self) -> int:
        """The episode's token budget: the schedule's value at this step, else the env's
        ``max_total_tokens``, else ``rollout.max_tokens`` (an env without a ledger budget)."""
        budget = context_budget(self.config.rollout.context_schedule, self.step)
        if budget is None:
            budget = self._env_budget
        return int(budget) if isinstance(budget, int) else self.config.rollout.max_tokens

    @functools.cached_property
    def _env_budget(self) -> int | None:
        """The env's own ``max_total_tokens`` (read from an env already made, else a probe)."""
        envs = list(self._sized_envs)
        env = envs[0] if envs else self.make_env()
        try:
            return getattr(getattr(env, "unwrapped", None), "max_total_tokens", None)
        finally:
            if not envs and env is not None:
                env.close()

    def _rollout(self, n: int) -> list[Group]:
        """``n`` fresh tasks, ``samples_per_task`` episodes each, through the rollout engine."""
        c, r = self.config, self.config.rollout
        self.model.eval()
        seed = c.train.seed * 1_000_003 + self.step * 101 + self._round  # reproducible on resume
        self._round += 1
        sampling = SamplingParams(max_tokens=r.max_tokens, temperature=r.temperature,
                                  top_p=r.top_p, top_k=r.top_k, seed=seed)
        rollouts = collect(self.runner, self.policy, self.tasks.next(n),
                           samples_per_task=r.samples_per_task, max_concurrency=r.max_concurrency,
                           sampling=sampling, progress=c.train.progress, mode=r.mode, seed=seed)
        self._generated += rollouts.stats.policy_tokens
        judge_pending(judge_of(list(self._sized_envs)), rollouts.groups())  # grouped judge rewards
        return [mark_exclusions(Group(f"{self.step}:{i}", g), c.algorithm.mask_void,
                                c.algorithm.mask_infra) for i, g in enumerate(rollouts.groups())]

    # ------------------------------------------------------------------ update
    def update(self, batch: TrainBatch) -> dict[str, float]:
        """``ppo_epochs`` passes of clipped-surrogate updates over ``batch``."""
        a = self.config.algorithm
        self._fill_reference_logprobs(batch)
        n = len(batch)
        mini = a.mini_batch_size or n
        totals: dict[str, float] = {}
        tokens, t0 = 0, time.perf_counter()
        order_rng = torch.Generator().manual_seed(self.config.train.seed + self.step)
        self.model.train()
        try:
            for _ in range(a.ppo_epochs):
                order = torch.randperm(n, generator=order_rng)
                for start in range(0, n, mini):
                    stats, seen = self._optimizer_step(batch, order[start:start + mini])
                    tokens += seen
                    for k, v in stats.items():
                        totals[k] = totals.get(k, 0.0) + v
        finally:
            self.model.eval()
        self.scheduler.step()
        steps = a.ppo_epochs * math.ceil(n / mini)
        out = {k: v / steps for k, v in totals.items()}
        elapsed = time.perf_counter() - t0
        out.update({"train/sequences": n, "train/tokens": tokens / a.ppo_epochs,
                    "train/loss_tokens": float(batch.loss_mask.sum()),
                    "throughput/train_tokens_per_s": tokens / max(elapsed, 1e-9)})
        return out

    def _optimizer_step(self, batch: TrainBatch, rows: torch.Tensor) -> tuple[dict, int]:
        """One optimizer step over ``rows``, accumulated over micro-batches."""
        a = self.config.algorithm
        max_len = a.max_len or (self.episode_budget() if a.aggregation == "token_sum_norm"
                                else None)
        denom = default_denominator(batch.loss_mask[rows], a.aggregation, max_len)
        weight = float(batch.loss_mask[rows].sum()) or 1.0
        sums = {"loss": 0.0, "clip_frac": 0.0, "kl": 0.0, "ratio": 0.0, "entropy": 0.0}
        seen = 0
        for start in range(0, len(rows), a.micro_batch_size):
            mb = batch.rows(rows[start:start + a.micro_batch_size]).to(self.device)
            with autocast(self.device, self.config.model.dtype):
                logp, ent = token_logprobs(self.model, mb.input_ids, mb.attention_mask,
                                           self.config.rollout.temperature,
                                           first=int(mb.prompt_lengths.min()), with_entropy=True,
                                           vocab=self.vocab)
            loss, st = policy_loss(logp, mb.old_logprobs, mb.advantages, mb.loss_mask,
                                   mb.ref_logprobs, clip_low=a.clip_low, clip_high=a.clip_high,
                                   kl_coef=a.kl_coef, aggregation=a.aggregation,
                                   denominator=denom, max_len=max_len, weights=mb.token_weights)
            loss.backward()
            share = float(mb.loss_mask.sum()) / weight
            sums["loss"] += float(loss.detach())
            for k in ("clip_frac", "kl", "ratio"):
                sums[k] += st[k] * share
            sums["entropy"] += float((ent * mb.loss_mask).sum()) / weight
            seen += mb.num_tokens
        params = [p for p in self.model.parameters() if p.requires_grad]
        clip = self.config.optim.grad_clip
        norm = torch.nn.utils.clip_grad_norm_(params, clip if clip and clip > 0 else float("inf"))
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        sums["grad_norm"] = float(norm)
        return sums, seen

    @torch.no_grad()
    def _fill_reference_logprobs(self, batch: TrainBatch) -> None:
        """Old logprobs when the sampler gave none (or they are not to be used), and the frozen
        reference's logprobs when the KL term is on, computed before any weight changes."""
        a = self.config.algorithm
        recompute = not (a.use_sampler_logprobs and batch.has_sampler_logprobs)
        if not recompute and self.ref_model is None:
            return
        if self.ref_model is not None:
            batch.ref_logprobs = torch.zeros_like(batch.old_logprobs)
        self.model.eval()
        for start in range(0, len(batch), a.micro_batch_size):
            idx = torch.arange(start, min(start + a.micro_batch_size, len(batch)))
            mb = batch.rows(idx).to(self.device)
            width = mb.input_ids.shape[1]
            first = int(mb.prompt_lengths.min())
            with autocast(self.device, self.config.model.dtype):
                if recompute:
                    lp, _ = token_logprobs(self.model, mb.input_ids, mb.attention_mask,
                                           self.config.rollout.temperature, first,
                                           vocab=self.vocab)
                    batch.old_logprobs[idx, :width] = lp.float().cpu()
                if self.ref_model is not None:
                    lp, _ = token_logprobs(self.ref_model, mb.input_ids, mb.attention_mask,
                                           self.config.rollout.temperature, first,
                                           vocab=self.vocab)
                    batch.ref_logprobs[idx, :width] = lp.float().cpu()

    # ------------------------------------------------------------------ weights
    def _stamp_policy_version(self) -> None:
        """The weights about to sample are those after ``self.step`` updates: the policy says so
        to every episode it generates for (``trajectory.metadata["policy_version"]``)."""
        try:
            self.policy.version = self.step
        except AttributeError:  # a policy object that takes no attributes: versions unknown
            pass

    def sync_weights(self) -> None:
        """Push the trained weights to a generator that holds its own copy (vLLM)."""
        if getattr(self.policy, "model", None) is self.model:
            return  # HFPolicy: generates from this very object
        push = getattr(self.policy, "update_weights", None)
        if push is None:
            return
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        push((name, t.detach().to(dtype)) for name, t in self.model.state_dict().items())

    def close(self) -> None:
        self.runner.close()
        closer = getattr(self.policy, "close", None)
        if closer is not None:
            closer()


def _dump_step(path: Path) -> int:
    """The step of a ``step_NNNNN.jsonl`` dump (-1 for any other name)."""
    digits = path.stem.removeprefix("step_")
    return int(digits) if digits.isdigit() else -1


def say(message: str) -> None:
    """A notice for the person running the trainer (stderr, so stdout stays metrics)."""
    print(f"grpo: {message}", file=sys.stderr, flush=True)


def _scale(advantage: str) -> str:
    return "std" if advantage == "grpo" else "none"


def _pad_id(tokenizer) -> int:
    for name in ("pad_token_id", "eos_token_id"):
        value = getattr(tokenizer, name, None)
        if isinstance(value, int):
            return value
    return 0
