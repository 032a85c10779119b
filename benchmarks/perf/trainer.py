"""Training throughput and peak memory of the GRPO update for a real model shape.

Prints JSON.  The model has random weights in the shape of a real one (``--preset``, e.g.
Qwen2.5-0.5B; ``--layers`` cuts the depth so a CPU can run it).  The batch is synthetic but
shaped like a rollout: a prompt, then policy tokens with an observation span masked out, sampler
logprobs that differ from the model's (so ratios and clipping are live), random advantages.

Four variants run side by side, each in its own subprocess so its peak memory is its own
(CPU: peak RSS; GPU: ``torch.cuda.max_memory_allocated``):

* ``grpo``: ``GRPOTrainer.update`` — logprobs at the sampling temperature, entropy, the clipped
  loss, AdamW step;
* ``grpo_ckpt``: the same with gradient (activation) checkpointing;
* ``lm_baseline``: a plain causal-LM cross-entropy step (``model(..., labels=...)`` + AdamW) on
  the same tokens — what a framework's bare training step costs;
* ``paired``: ``grpo`` and ``lm_baseline`` alternated on one model in one process, ``--steps``
  pairs: the ratio to quote on a shared machine (each pair sees the same load).

Ratios: ``grpo_over_lm_tokens_per_s`` (overhead of the GRPO update over a bare LM step),
``ckpt_over_grpo_peak_mem`` and ``ckpt_over_grpo_tokens_per_s`` (what checkpointing saves and
costs).  Tokens/s counts every non-padding token forwarded and back-propagated.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tir_envs.bench.perf.quick import QUICK, pick  # noqa: E402

PRESETS = {  # Hugging Face config fields of the real models (weights are random here)
    "qwen2.5-0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                         num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
                         tie_word_embeddings=True, rope_theta=1000000.0),
    "qwen2.5-1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                         num_attention_heads=12, num_key_value_heads=2, vocab_size=151936,
                         tie_word_embeddings=True, rope_theta=1000000.0),
    "qwen2.5-7b": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                       num_attention_heads=28, num_key_value_heads=4, vocab_size=152064,
                       tie_word_embeddings=False, rope_theta=1000000.0),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, vocab_size=1024,
                 tie_word_embeddings=True),
}
VARIANTS = ("grpo", "grpo_ckpt", "lm_baseline", "paired")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="qwen2.5-0.5b", choices=sorted(PRESETS))
    p.add_argument("--layers", type=int, default=None,
                   help="override the number of layers (default: the preset's; 2 on CPU)")
    p.add_argument("--seq-len", type=int, default=None, help="tokens per sequence "
                   "(default 2048 on GPU, 256 on CPU)")
    p.add_argument("--batch", type=int, default=None, help="sequences per update "
                   "(default 16 on GPU, 2 on CPU)")
    p.add_argument("--micro-batch", type=int, default=None, help="sequences per forward "
                   "(default: GPU 4, CPU the whole batch)")
    p.add_argument("--steps", type=int, default=2, help="timed updates after one warm-up")
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="auto", choices=["auto", "fp32", "bf16"])
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def resolve(args: argparse.Namespace) -> argparse.Namespace:
    import torch
    gpu = torch.cuda.is_available() if args.device == "auto" else args.device.startswith("cuda")
    args.device = ("cuda" if gpu else "cpu") if args.device == "auto" else args.device
    if QUICK:  # a smoke run: the tiny shape, one short batch
        args.preset, args.layers = "tiny", args.layers or 2
        args.seq_len, args.batch, args.steps = args.seq_len or 64, args.batch or 2, 1
        if args.variants == ",".join(VARIANTS):  # two processes cover every step function
            args.variants = "grpo_ckpt,paired"
    args.layers = args.layers or (PRESETS[args.preset]["num_hidden_layers"] if gpu else 2)
    args.seq_len = args.seq_len or (2048 if gpu else 256)
    args.batch = args.batch or (16 if gpu else 2)
    args.micro_batch = args.micro_batch or (4 if gpu else args.batch)
    return args


def synthetic_batch(args, vocab: int):
    """A rollout-shaped batch: prompt (1/4), then policy tokens with one observation span."""
    import torch
    from tir_envs.trainers.grpo.batch import TrainBatch

    g = torch.Generator().manual_seed(0)
    n, t = args.batch, args.seq_len
    prompt = t // 4
    ids = torch.randint(0, vocab, (n, t), generator=g)
    mask = torch.zeros(n, t)
    mask[:, prompt:] = 1.0
    obs = prompt + (t - prompt) // 2
    mask[:, obs:obs + (t - prompt) // 8] = 0.0  # a tool observation: no loss
    return TrainBatch(input_ids=ids, attention_mask=torch.ones(n, t, dtype=torch.long),
                      loss_mask=mask, old_logprobs=-torch.rand(n, t, generator=g) * 12 - 1,
                      advantages=torch.randn(n, generator=g),
                      prompt_lengths=torch.full((n,), prompt, dtype=torch.long),
                      has_sampler_logprobs=True)


def run_child(args: argparse.Namespace) -> dict:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tir_envs.trainers.grpo.modeling import set_checkpointing

    torch.manual_seed(0)
    device = torch.device(args.device)
    rss0 = _rss_mb()
    fields = {**PRESETS[args.preset], "num_hidden_layers": args.layers,
              "max_position_embeddings": max(args.seq_len, 32)}
    model = Qwen2ForCausalLM(Qwen2Config(**fields))
    if args.dtype == "bf16":
        model = model.to(torch.bfloat16)
    model = model.to(device)
    if args.child == "grpo_ckpt":
        set_checkpointing(model, True)
    params = sum(p.numel() for p in model.parameters())
    batch = synthetic_batch(args, fields["vocab_size"])
    tokens = int(batch.attention_mask.sum())
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()

    if args.child == "paired":
        return run_paired(args, model, batch, fields["vocab_size"], params, tokens)
    step = (lm_step(args, model, batch) if args.child == "lm_baseline"
            else grpo_step(args, model, fields["vocab_size"]))
    step()  # warm-up (allocator, kernels, optimizer state)
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    _sync(device)
    elapsed = (time.perf_counter() - t0) / args.steps
    peak = (torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda"
            else _rss_mb() - rss0)
    return {"variant": args.child, "params": params, "tokens_per_step": tokens,
            "step_s": round(elapsed, 3), "tokens_per_s": round(tokens / elapsed, 1),
            "peak_mem_mb": round(peak, 1),
            "peak_mem_kind": "cuda_max_allocated" if device.type == "cuda" else "rss_growth"}


def lm_step(args, model, batch):
    """A bare causal-LM step: ``model(..., labels=...)`` cross-entropy, backward, AdamW."""
    import torch
    from tir_envs.trainers.grpo.modeling import autocast

    device = next(model.parameters()).device
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)

    def step():
        model.train()
        for s in range(0, args.batch, args.micro_batch):
            ids = batch.input_ids[s:s + args.micro_batch].to(device)
            with autocast(device, args.dtype):
                loss = model(input_ids=ids, labels=ids).loss
            (loss * ids.shape[0] / args.batch).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def grpo_step(args, model, vocab: int):
    """One ``GRPOTrainer.update`` on a fresh synthetic batch (its own AdamW)."""
    from tir_envs.trainers.grpo.config import GRPOConfig
    from tir_envs.trainers.grpo.trainer import GRPOTrainer

    config = GRPOConfig.from_dict({
        "model": {"random_init": {}, "device": args.device, "dtype": args.dtype},
        "rollout": {"temperature": 1.0, "max_tokens": args.seq_len},
        "algorithm": {"micro_batch_size": args.micro_batch, "clip_high": 0.28},
        "optim": {"lr": 1e-6}, "train": {"output_dir": tempfile.mkdtemp(), "resume": False,
                                         "tensorboard": False}})
    trainer = GRPOTrainer(config, model=model, tokenizer=_FakeTokenizer(vocab),
                          env=lambda: None, tasks=["benchmark"], policy=object())
    return lambda: trainer.update(synthetic_batch(args, vocab))


def run_paired(args, model, batch, vocab: int, params: int, tokens: int) -> dict:
    """Both steps on one model in one process, alternated ``args.steps`` times: each pair
    sees the same machine load, so the median of the per-pair ratios holds up on a busy
    machine where separate runs minutes apart do not."""
    import statistics

    device = next(model.parameters()).device
    steps = {"grpo": grpo_step(args, model, vocab), "lm_baseline": lm_step(args, model, batch)}
    for step in steps.values():
        step()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in steps}
    for i in range(args.steps):
        order = list(steps) if i % 2 == 0 else list(reversed(steps))
        for name in order:
            _sync(device)
            t0 = time.perf_counter()
            steps[name]()
            _sync(device)
            times[name].append(time.perf_counter() - t0)
    ratios = [lm / grpo for grpo, lm in zip(times["grpo"], times["lm_baseline"])]
    return {"variant": "paired", "params": params, "tokens_per_step": tokens, "pairs": args.steps,
            "grpo_step_s": [round(x, 3) for x in times["grpo"]],
            "lm_step_s": [round(x, 3) for x in times["lm_baseline"]],
            "grpo_over_lm_tokens_per_s": round(statistics.median(ratios), 3)}


class _FakeTokenizer:
    """The update needs no tokenizer: the trainer reads pad/eos ids and its size (the ids the
    policy samples from; here every row of the model's vocabulary)."""

    pad_token_id = 0
    eos_token_id = 0

    def __init__(self, size: int):
        self.size = size

    def __len__(self) -> int:
        return self.size


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _sync(device) -> None:
    import torch
    if device.type == "cuda":
        torch.cuda.synchronize()


def main(argv=None) -> int:
    args = resolve(parse_args(argv))
    if args.child:
        print(json.dumps(run_child(args)))
        return 0
    base = [sys.executable, __file__, "--preset", args.preset, "--layers", str(args.layers),
            "--seq-len", str(args.seq_len), "--batch", str(args.batch), "--micro-batch",
            str(args.micro_batch), "--steps", str(args.steps), "--device", args.device,
            "--dtype", args.dtype]
    results = {}
    for variant in args.variants.split(","):
        proc = subprocess.run(base + ["--child", variant], capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stderr[-3000:], file=sys.stderr)
            return proc.returncode
        results[variant] = json.loads(proc.stdout.strip().splitlines()[-1])
    out = {"benchmark": "grpo_update", "preset": args.preset, "layers": args.layers,
           "seq_len": args.seq_len, "batch": args.batch, "micro_batch": args.micro_batch,
           "device": args.device, "dtype": args.dtype, "threads": _threads(),
           "results": results, "ratios": _ratios(results)}
    print(json.dumps(out, indent=1))
    return 0


def _ratios(r: dict) -> dict:
    out = {}
    if "paired" in r:  # the figure to quote: alternated in one process (see run_paired)
        out["grpo_over_lm_tokens_per_s_paired"] = r["paired"]["grpo_over_lm_tokens_per_s"]
    if "grpo" in r and "lm_baseline" in r:
        out["grpo_over_lm_tokens_per_s"] = round(
            r["grpo"]["tokens_per_s"] / r["lm_baseline"]["tokens_per_s"], 3)
        out["grpo_over_lm_peak_mem"] = round(
            r["grpo"]["peak_mem_mb"] / max(r["lm_baseline"]["peak_mem_mb"], 1e-9), 3)
    if "grpo" in r and "grpo_ckpt" in r:
        out["ckpt_over_grpo_tokens_per_s"] = round(
            r["grpo_ckpt"]["tokens_per_s"] / r["grpo"]["tokens_per_s"], 3)
        out["ckpt_over_grpo_peak_mem"] = round(
            r["grpo_ckpt"]["peak_mem_mb"] / max(r["grpo"]["peak_mem_mb"], 1e-9), 3)
    return out


def _threads() -> int:
    import torch
    return torch.get_num_threads()


if __name__ == "__main__":
    sys.exit(main())
