"""The GRPO loop end to end on the toy tool env: real rollout engine, real ``HFPolicy``, a tiny
random Qwen2.  Each switch the loop has is exercised here; the learning run is in
``test_grpo_learns.py``."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tir_envs.rollout import HFPolicy  # noqa: E402
from tir_envs.tools.base import Tool  # noqa: E402
from tir_envs.trainers.grpo.config import GRPOConfig  # noqa: E402
from tir_envs.trainers.grpo.logprobs import token_logprobs  # noqa: E402
from tir_envs.trainers.grpo.toy_env import ToyToolEnv  # noqa: E402
from tir_envs.trainers.grpo.trainer import GRPOTrainer  # noqa: E402

TOY = Path(__file__).resolve().parents[1] / "trainers" / "grpo" / "configs" / "toy.yaml"
METRICS = ["reward/mean", "accuracy", "response_length", "tool_calls_per_episode", "code_ratio",
           "tool_error_rate", "kl", "clip_frac", "entropy", "throughput/train_tokens_per_s",
           "throughput/rollout_tokens_per_s", "loss", "grad_norm", "groups/kept"]


def config(tmp: Path, *overrides: str) -> GRPOConfig:
    return GRPOConfig.load(TOY, [f"train.output_dir={tmp}", "train.tensorboard=false",
                                 "rollout.tasks_per_step=4", "rollout.samples_per_task=4",
                                 "algorithm.mask_void=false", *overrides])


def params(model) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def same(a, b, atol=0.0) -> bool:
    return all(torch.allclose(x, y, atol=atol, rtol=0) for x, y in zip(a, b))


def plain_sgd(trainer: GRPOTrainer) -> GRPOTrainer:
    """Adam turns the tiny float noise of a near-zero gradient into a full step; with SGD at
    lr=1 the weight change *is* the gradient, which is what these comparisons are about."""
    trainer.optimizer = torch.optim.SGD(trainer.model.parameters(), lr=1.0)
    trainer.scheduler = torch.optim.lr_scheduler.LambdaLR(trainer.optimizer, lambda s: 1.0)
    return trainer


def test_a_step_logs_every_metric_to_jsonl(tmp_path):
    trainer = GRPOTrainer(config(tmp_path, "train.steps=2"))
    before = params(trainer.model)
    trainer.train()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for key in METRICS:
        assert isinstance(rows[-1][key], (int, float)), key
    assert not same(before, params(trainer.model))  # the weights moved
    assert (tmp_path / "checkpoints" / "step_0000002" / "model" / "config.json").is_file()


def test_rerunning_a_run_says_where_it_resumes_and_when_there_is_nothing_to_do(tmp_path,
                                                                             capsys):
    GRPOTrainer(config(tmp_path, "train.steps=1")).train()
    assert "resuming" not in capsys.readouterr().err  # a fresh run starts quietly
    again = GRPOTrainer(config(tmp_path, "train.steps=1"))
    assert again.train() == []
    err = capsys.readouterr().err
    assert "grpo: resuming from step 1" in err
    assert ("grpo: nothing to do: the run finished at step 1 (raise train.steps or use a new "
            "output dir)") in err
    saved = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    more = GRPOTrainer(config(tmp_path, "train.steps=2"))
    assert [r["step"] for r in more.train()] == [2]
    assert "resuming from step 1" in capsys.readouterr().err
    assert saved == ["step_0000001"]


def test_sampler_logprobs_are_what_the_trainer_computes(tmp_path):
    trainer = GRPOTrainer(config(tmp_path, "rollout.tasks_per_step=8"))
    groups = trainer._rollout(8)
    trajs = [t for g in groups for t in g.trajectories]
    assert all(t.has_logprobs for t in trajs)
    from tir_envs.trainers.grpo.batch import build_batch
    batch = build_batch(groups, trainer.pad_id)
    with torch.no_grad():
        lp, _ = token_logprobs(trainer.model, batch.input_ids, batch.attention_mask, 1.0)
    on = batch.loss_mask > 0
    assert torch.allclose(lp[on], batch.old_logprobs[on], atol=1e-4)
    # so the first update's importance ratios are 1 and nothing is clipped
    stats = trainer.update(batch)
    assert stats["ratio"] == pytest.approx(1.0, abs=1e-4) and stats["clip_frac"] == 0.0


def test_padded_embedding_rows_are_left_out_on_both_sides(tmp_path):
    """A model with more embedding rows than tokens (Qwen2.5): the sampler never draws the
    padded ids and the trainer normalises over the same ids, so ratios still start at 1."""
    from tir_envs.trainers.grpo.toy_env import toy_tokenizer
    vocab = len(toy_tokenizer())
    rows = vocab + 48
    trainer = GRPOTrainer(config(tmp_path, f"model.random_init.vocab_size={rows}"))
    assert trainer.model.get_input_embeddings().weight.shape[0] == rows
    with torch.no_grad():  # make the padded rows the model's favourites
        trainer.model.get_input_embeddings().weight[vocab:] *= 50
    from tir_envs.trainers.grpo.batch import build_batch
    batch = build_batch(trainer._rollout(4), trainer.pad_id)
    on = batch.loss_mask > 0
    assert int(batch.input_ids.max()) < vocab
    stats = trainer.update(batch)
    assert stats["ratio"] == pytest.approx(1.0, abs=1e-4) and stats["clip_frac"] == 0.0
    assert on.any()


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean", "token_sum_norm"])
def test_gradient_accumulation_equals_one_big_batch(tmp_path, aggregation):
    whole = plain_sgd(GRPOTrainer(config(tmp_path / "a", f"algorithm.aggregation={aggregation}",
                                         "optim.grad_clip=0")))
    parts = plain_sgd(GRPOTrainer(config(tmp_path / "b", f"algorithm.aggregation={aggregation}",
                                         "optim.grad_clip=0", "algorithm.micro_batch_size=3")))
    assert same(params(whole.model), params(parts.model))
    from tir_envs.trainers.grpo.batch import build_batch
    batch = build_batch(whole._rollout(4), whole.pad_id)
    before = params(whole.model)
    a = whole.update(copy.deepcopy(batch))
    b = parts.update(copy.deepcopy(batch))
    assert a["loss"] == pytest.approx(b["loss"], abs=1e-6)
    moved = max(float((p - q).abs().max()) for p, q in zip(params(whole.model), before))
    assert moved > 1e-4  # a real update, not a no-op
    assert same(params(whole.model), params(parts.model), atol=1e-6)


def test_mini_batches_and_epochs_take_several_optimizer_steps(tmp_path):
    trainer = GRPOTrainer(config(tmp_path, "algorithm.ppo_epochs=2",
                                 "algorithm.mini_batch_size=4", "optim.lr=0.05"))
    from tir_envs.trainers.grpo.batch import build_batch
    batch = build_batch(trainer._rollout(4), trainer.pad_id)
    calls = []
    trainer.optimizer.register_step_post_hook(lambda *a: calls.append(1))
    stats = trainer.update(batch)
    assert len(calls) == 2 * ((len(batch) + 3) // 4)
    assert stats["ratio"] != pytest.approx(1.0, abs=1e-6)  # later mini-batches are off-policy


def test_resume_continues_exactly_where_it_stopped(tmp_path):
    straight = GRPOTrainer(config(tmp_path / "straight", "train.steps=3", "train.save_every=0"))
    straight.train()
    first = GRPOTrainer(config(tmp_path / "resumed", "train.steps=3", "train.save_every=2"))
    first.train(steps=2)
    again = GRPOTrainer(config(tmp_path / "resumed", "train.steps=3", "train.save_every=2"))
    assert again.step == 2 and again.tasks.state_dict() == first.tasks.state_dict()
    again.train()
    assert again.step == 3
    assert same(params(straight.model), params(again.model), atol=1e-6)
    steps = [json.loads(x)["step"] for x in
             (tmp_path / "resumed" / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]


def test_kl_to_a_frozen_reference(tmp_path):
    trainer = GRPOTrainer(config(tmp_path, "algorithm.kl_coef=0.1", "optim.lr=0.01"))
    ref_before = params(trainer.ref_model)
    assert all(not p.requires_grad for p in trainer.ref_model.parameters())
    history = [trainer.train_step() for _ in range(3)]
    assert history[0]["kl"] == 0.0  # policy == reference before the first update
    assert history[-1]["kl"] > 0.0
    assert same(ref_before, params(trainer.ref_model))
    assert GRPOTrainer(config(tmp_path / "off")).ref_model is None


def test_accuracy_band_drops_groups_and_refills(tmp_path):
    trainer = GRPOTrainer(config(tmp_path, "algorithm.accuracy_band=[0.2,0.8]",
                                 "algorithm.max_refill_rounds=3"))
    seen = []
    original = trainer._rollout

    def spy(n):
        groups = original(n)
        seen.append(groups)
        return groups

    trainer._rollout = spy
    m = trainer.train_step()
    # an untrained policy is mostly wrong: many groups fall outside the band, so it refills
    assert m["refill_rounds"] >= 2 and m["groups/sampled"] > m["groups/kept"]
    assert m["groups/sampled"] == sum(len(g) for g in seen)
    kept = [g for gs in seen for g in gs if trainer.band.keep(g)][:4]
    assert m["groups/kept"] == len(kept)
    assert m["train/sequences"] == 4 * len(kept)


class BrokenTool(Tool):
    name = "lookup"

    async def call(self, arguments, session=None):
        raise ConnectionError("sandbox died")


class BrokenToolEnv(ToyToolEnv):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.tools = {"lookup": BrokenTool()}


def test_infra_failed_episodes_are_not_trained_on(tmp_path):
    c = config(tmp_path, "rollout.tasks_per_step=8")
    trainer = GRPOTrainer(c, env=lambda: BrokenToolEnv(num_values=8))
    groups = trainer._rollout(8)
    trajs = [t for g in groups for t in g.trajectories]
    failed = sum(t.infra_failed for t in trajs)
    assert failed > 0  # the random policy calls the tool now and then
    from tir_envs.trainers.grpo.batch import build_batch
    batch = build_batch(groups, trainer.pad_id)
    assert len(batch) == len(trajs) - failed
    from tir_envs.trainers.grpo.filtering import mark_exclusions
    remarked = [mark_exclusions(g, mask_void=False, mask_infra=False) for g in groups]
    assert len(build_batch(remarked, trainer.pad_id)) == len(trajs)


def test_gradient_checkpointing_gives_the_same_update(tmp_path):
    plain = plain_sgd(GRPOTrainer(config(tmp_path / "a", "optim.grad_clip=0")))
    ckpt = plain_sgd(GRPOTrainer(config(tmp_path / "b", "model.gradient_checkpointing=true",
                                        "optim.grad_clip=0")))
    assert any(getattr(m, "gradient_checkpointing", False) for m in ckpt.model.modules())
    from tir_envs.trainers.grpo.batch import build_batch
    batch = build_batch(plain._rollout(4), plain.pad_id)
    plain.update(copy.deepcopy(batch))
    ckpt.update(copy.deepcopy(batch))
    assert same(params(plain.model), params(ckpt.model), atol=1e-6)


class CopyPolicy(HFPolicy):
    """A generator holding its own copy of the weights, like vLLM: it only sees new weights
    through ``update_weights``."""

    def update_weights(self, weights):
        state = dict(weights)
        self.model.load_state_dict(state, strict=False)
        self.pushes = getattr(self, "pushes", 0) + 1
        return self.pushes


def test_weights_are_pushed_to_a_generator_with_its_own_copy(tmp_path):
    c = config(tmp_path, "optim.lr=0.01")
    trainer = GRPOTrainer(c, policy=None)
    own = CopyPolicy(copy.deepcopy(trainer.model), trainer.tokenizer)
    trainer.policy = own
    trainer.train_step()
    trainer.train_step()
    assert own.pushes == 2
    assert same(params(trainer.model), params(own.model))


def test_resume_with_running_pass_rates_is_bit_identical(tmp_path):
    """RITE's options (running pass rate in a band, token weights, Dr. GRPO's constant divisor)
    carry across a checkpoint: 2 + 1 steps give exactly the weights of 3 straight steps."""
    rite = ("algorithm.accuracy_band=[0.1, 0.9]", "algorithm.pass_rate=running",
            "algorithm.token_weights=rite", "algorithm.advantage=dr_grpo",
            "algorithm.aggregation=token_sum_norm", "env.kwargs.num_values=2")
    straight = GRPOTrainer(config(tmp_path / "straight", "train.steps=3", *rite))
    straight.train()
    first = GRPOTrainer(config(tmp_path / "resumed", "train.steps=3", "train.save_every=2", *rite))
    first.train(steps=2)
    again = GRPOTrainer(config(tmp_path / "resumed", "train.steps=3", "train.save_every=2", *rite))
    assert again.pass_rates.counts == first.pass_rates.counts and again.pass_rates.counts
    again.train()
    assert same(params(straight.model), params(again.model))  # atol 0: bit-identical
    assert again.pass_rates.counts == straight.pass_rates.counts


def test_changed_settings_are_refused_on_resume_listing_each(tmp_path, capsys):
    from tir_envs.trainers.grpo.__main__ import main

    GRPOTrainer(config(tmp_path, "train.steps=1")).train()
    with pytest.raises(ValueError) as err:
        GRPOTrainer(config(tmp_path, "train.steps=2", "optim.lr=1e-3", "algorithm.kl_coef=0.1"))
    text = str(err.value)
    assert "refusing to resume from" in text and "step_0000001" in text
    assert "optim.lr: 0.002 (checkpoint) -> 0.001 (now)" in text
    assert "algorithm.kl_coef: 0.0 (checkpoint) -> 0.1 (now)" in text
    assert "train.steps" not in text.split("A resumed run may change only")[0]  # allowed
    assert "train.resume=false" in text
    # the CLI says the same and exits 2 before training
    argv = ["--config", "toy", f"train.output_dir={tmp_path}", "train.tensorboard=false",
            "rollout.tasks_per_step=4", "rollout.samples_per_task=4", "algorithm.mask_void=false",
            "train.steps=82", "optim.lr=1e-3"]
    capsys.readouterr()
    assert main(argv) == 2
    assert "optim.lr: 0.002 (checkpoint) -> 0.001 (now)" in capsys.readouterr().err
    # more steps (and where the records go) is an extension, and the trainer says so
    more = GRPOTrainer(config(tmp_path, "train.steps=2", "train.save_every=7"))
    assert more.step == 1
    err_text = capsys.readouterr().err
    assert "grpo: resuming with train.steps 1 -> 2" in err_text
    assert "grpo: resuming with train.save_every 0 -> 7" in err_text


def test_a_resume_without_a_checkpoint_says_it_starts_fresh(tmp_path, capsys):
    trainer = GRPOTrainer(config(tmp_path / "new", "train.steps=1"))
    assert trainer.step == 0
    assert f"grpo: no checkpoint in {tmp_path / 'new' / 'checkpoints'}: starting fresh" in \
        capsys.readouterr().err


def test_token_sum_norm_divides_by_the_episode_budget(tmp_path):
    """Dr. GRPO: L = Σ m·ℓ / (N · L_max) with L_max the episode's token budget (the env's
    max_total_tokens, or the context schedule's value), not the per-action max_tokens."""
    from tir_envs.trainers.grpo.batch import build_batch

    for extra, budget in (((), 64), (("rollout.context_schedule={0: 40, 5: 48}",), 40)):
        trainer = plain_sgd(GRPOTrainer(config(
            tmp_path / str(budget), "algorithm.aggregation=token_sum_norm",
            "algorithm.use_sampler_logprobs=false", *extra)))
        assert trainer.episode_budget() == budget != trainer.config.rollout.max_tokens
        assert trainer._apply_context_budget() in (None, budget)
        groups = [g for g in trainer._rollout(4) if len({t.reward for t in g.trajectories}) > 1]
        assert {e.unwrapped.max_total_tokens for e in trainer._sized_envs} == {budget}
        batch = build_batch(groups, trainer.pad_id, "std")
        trainer._fill_reference_logprobs(batch)  # old = current: every ratio is exactly 1
        stats, _ = trainer._optimizer_step(batch, torch.arange(len(batch)))
        expected = -float((batch.advantages[:, None] * batch.loss_mask).sum()) / (
            len(batch) * budget)
        assert stats["loss"] == pytest.approx(expected, rel=1e-5, abs=1e-9)
        trainer.close()


def test_the_context_schedule_grows_the_envs_budget_during_training(tmp_path):
    trainer = GRPOTrainer(config(tmp_path, "train.steps=3",
                                 "rollout.context_schedule={0: 32, 2: 48}"))
    history = trainer.train()
    assert [h["context_budget"] for h in history] == [32, 32, 48]
    assert {e.unwrapped.max_total_tokens for e in trainer._sized_envs} == {48}
    assert len(trainer._sized_envs) > 1  # the rollout's envs, made at step 0, were resized
    trainer.close()


class _Terminal:
    """A text stream that says it is a terminal, recording what is written to it."""

    def __init__(self, tty: bool):
        self.tty, self.text = tty, ""

    def isatty(self):
        return self.tty

    def write(self, s):
        self.text += s

    def flush(self):
        pass


def test_progress_is_a_bar_on_a_terminal_and_json_lines_otherwise():
    from tir_envs.trainers.grpo.progress import StepReporter

    records = [{"step": i, "reward/mean": r, "kl": 0.0} for i, r in ((3, 0.2), (4, 0.4), (5, 0.9))]
    tty = _Terminal(True)
    bar = StepReporter(start=2, total=10, stream=tty, window=2)
    for r in records:
        bar(r)
    bar.close()
    assert "5/10" in tty.text and "reward=0.650" in tty.text  # mean of the last 2 steps
    assert "<" in tty.text and "{" not in tty.text              # tqdm's elapsed<ETA, no JSON
    pipe = _Terminal(False)
    lines = StepReporter(start=2, total=10, stream=pipe)
    for r in records:
        lines(r)
    assert [json.loads(x) for x in pipe.text.splitlines()] == [
        {"step": 3, "reward/mean": 0.2, "kl": 0.0}, {"step": 4, "reward/mean": 0.4, "kl": 0.0},
        {"step": 5, "reward/mean": 0.9, "kl": 0.0}]


def test_rollout_dumps_open_in_the_viewer(tmp_path):
    from tir_envs.viewer import load_episodes, page_data

    trainer = GRPOTrainer(config(tmp_path, "train.steps=1", "train.dump_rollouts=true"))
    trainer.train()
    dump = tmp_path / "rollouts" / "step_00001.jsonl"
    assert dump.is_file()
    episodes, _ = load_episodes(tmp_path / "rollouts")
    assert len(episodes) == 4 * 4 and all(e.extra["step"] == 1 for e in episodes)
    data = page_data(episodes, trainer.tokenizer)
    for ep, detail in zip(episodes, data["episodes"]):
        assert detail["mask"] == ep.trajectory.loss_mask
        assert "".join(data["strings"][i] for i in detail["text"]) == trainer.tokenizer.decode(
            ep.trajectory.token_ids, skip_special_tokens=False)
