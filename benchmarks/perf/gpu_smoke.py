"""GPU smoke run: the bundled GRPO trainer and TRL's ``GRPOTrainer`` side by side on one card.

Prints JSON.  One prepared script for a lent GPU machine (no hub, no vLLM: every model is built
from its config in code with random weights, in the shapes of Qwen2.5-0.5B and 1.5B):

* ``grpo``: the bundled trainer, two steps on ``tir/MathCode-v0`` (ToRL protocol, generated
  training problems) with the model's own ``generate`` (HF backend) and the real sandbox;
* ``trl``: TRL's ``GRPOTrainer`` with the adapter's ``rollout_func``, two steps on the same
  env and tasks (in this interpreter when TRL is importable, else in the checkout's
  ``.venv-trl`` when it exists; otherwise reported as skipped with the reason);
* ``loss_bf16``: one batch through the GRPO update in bf16 (``benchmarks/perf/trainer.py``).

Each reports generated tokens/s, trained tokens/s and peak memory (GPU: the allocator's peak;
CPU: peak RSS).  ``PERF_QUICK=1`` (``make perf-smoke``) runs a tiny shape on CPU so the
script cannot rot; its figures say it runs, not how fast.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks.perf.quick import QUICK  # noqa: E402
from benchmarks.perf.trainer import PRESETS  # noqa: E402

SHAPES = ("qwen2.5-0.5b", "qwen2.5-1.5b")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", default=",".join(SHAPES))
    p.add_argument("--parts", default="grpo,trl,loss_bf16")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=None, help="per action (GPU 256, CPU 16)")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)  # "PART:SHAPE"
    return p.parse_args(argv)


def model_fields(shape: str, gpu: bool) -> dict:
    """The real shape on a GPU, a tiny one on CPU; the vocabulary is the real one's (the bundled
    Qwen2.5 tokenizer's ids must all be in it)."""
    fields = dict(PRESETS[shape] if gpu else PRESETS["tiny"])
    fields["vocab_size"] = PRESETS["qwen2.5-0.5b"]["vocab_size"]
    return fields


def tasks_file(folder: Path, n: int) -> Path:
    from trainers.common.training_data import main as training_data

    path = folder / "math_train.jsonl"
    if not path.exists():
        training_data(["math", "--n", str(n), "--out", str(path)])
    return path


def peak_mem_mb() -> float:
    import torch

    if torch.cuda.is_available():
        return round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def run_grpo(shape: str, steps: int, max_tokens: int, folder: Path) -> dict:
    import torch

    from trainers.grpo.config import GRPOConfig
    from trainers.grpo.trainer import GRPOTrainer

    gpu = torch.cuda.is_available()
    fields = model_fields(shape, gpu)
    tasks = tasks_file(folder, 64)
    config = GRPOConfig.load(None, [
        f"model.random_init={json.dumps(fields)}", "model.tokenizer=qwen2.5",
        "env.id=tir/MathCode-v0", f"env.kwargs={json.dumps({'protocol': 'torl'})}",
        f"data.path={tasks}", "data.loader=tir_envs.data.math:load_math_tasks",
        "rollout.samples_per_task=4", f"rollout.tasks_per_step={4 if gpu else 2}",
        f"rollout.max_tokens={max_tokens}", f"train.steps={steps}", "train.save_every=0",
        f"train.output_dir={folder / ('grpo-' + shape)}", "train.tensorboard=false",
        "train.resume=false", "algorithm.micro_batch_size=4"])
    trainer = GRPOTrainer(config)
    t0 = time.perf_counter()
    history = trainer.train()
    wall = time.perf_counter() - t0
    trainer.close()
    return {"steps": len(history), "wall_s": round(wall, 2),
            "rollout_tokens_per_s": _mean(h.get("throughput/rollout_tokens_per_s") for h in history),
            "train_tokens_per_s": _mean(h.get("throughput/train_tokens_per_s") for h in history),
            "peak_mem_mb": peak_mem_mb()}


def run_trl(shape: str, steps: int, max_tokens: int, folder: Path) -> dict:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tir_envs.tokenizer import load_tokenizer
    from tir_envs.data.math.loader import load_math_tasks
    from trainers.trl.train import build_trainer, device_defaults

    gpu = torch.cuda.is_available()
    tok = load_tokenizer(None)
    fields = {**model_fields(shape, gpu), "eos_token_id": tok.eos_token_id,
              "pad_token_id": tok.pad_token_id}
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**fields))
    if gpu:
        model = model.to(torch.bfloat16)
    tasks = [{"id": t.id, "question": t.question, "answer": t.answer}
             for t in load_math_tasks(str(tasks_file(folder, 64)))]
    n = 4 if gpu else 2
    trainer = build_trainer(
        "tir/MathCode-v0", {"protocol": "torl", "tasks": tasks}, model, tok,
        [t["id"] for t in tasks[:n * steps]], output_dir=str(folder / f"trl-{shape}"),
        max_steps=steps, num_generations=4, per_device_train_batch_size=4,
        max_completion_length=max_tokens, report_to=[], logging_steps=1, save_strategy="no",
        **device_defaults())
    generated = []
    inner = trainer.rollout_func
    trainer.rollout_func = lambda p, tr: generated.append(inner(p, tr)) or generated[-1]
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0
    policy_tokens = sum(sum(m) for out in generated for m in out["env_mask"])
    return {"steps": trainer.state.global_step, "wall_s": round(wall, 2),
            "generated_tokens": int(policy_tokens),
            "tokens_per_s_overall": round(policy_tokens / max(wall, 1e-9), 1),
            "peak_mem_mb": peak_mem_mb()}


def run_loss_bf16(shape: str) -> dict:
    cmd = [sys.executable, str(ROOT / "benchmarks" / "perf" / "trainer.py"), "--preset",
           shape if not QUICK else "tiny", "--dtype", "bf16", "--variants", "grpo"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    grpo = json.loads(proc.stdout)["results"]["grpo"]
    return {k: grpo[k] for k in ("tokens_per_s", "peak_mem_mb") if k in grpo}


def child(part: str, shape: str, args: argparse.Namespace, folder: Path) -> dict:
    if part == "grpo":
        return run_grpo(shape, args.steps, args.max_tokens, folder)
    if part == "trl":
        return run_trl(shape, args.steps, args.max_tokens, folder)
    return run_loss_bf16(shape)


def trl_python() -> str | None:
    """An interpreter with TRL: this one, or the checkout's ``.venv-trl``."""
    try:
        import trl  # noqa: F401
        return sys.executable
    except ImportError:
        venv = ROOT / ".venv-trl" / "bin" / "python"
        return str(venv) if venv.exists() else None


def run_part(part: str, shape: str, args: argparse.Namespace, folder: Path) -> dict:
    """Each part in its own process, so its peak memory is its own."""
    python = trl_python() if part == "trl" else sys.executable
    if python is None:
        return {"skipped": "TRL is not installed here and no .venv-trl exists (make test-trl)"}
    cmd = [python, __file__, "--child", f"{part}:{shape}", "--steps", str(args.steps),
           "--max-tokens", str(args.max_tokens)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TIR_GPU_SMOKE_DIR": str(folder)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"{part} on {shape} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    gpu = torch.cuda.is_available()
    args.max_tokens = args.max_tokens or (256 if gpu else 16)
    if QUICK:
        args.steps = 1
    if args.child:
        part, shape = args.child.split(":")
        print(json.dumps(child(part, shape, args, Path(os.environ["TIR_GPU_SMOKE_DIR"]))))
        return 0
    shapes = args.shapes.split(",") if gpu else ["tiny"]
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for shape in shapes:
            results[shape] = {p: run_part(p, shape if gpu else "qwen2.5-0.5b", args, Path(tmp))
                              for p in args.parts.split(",")}
    out = {"benchmark": "gpu_smoke", "device": torch.cuda.get_device_name(0) if gpu else "cpu",
           "shapes": shapes, "max_tokens": args.max_tokens, "steps": args.steps,
           "note": None if gpu else "CPU: a tiny shape; the figures only show the script runs",
           "results": results, "load": os.getloadavg()}
    print(json.dumps(out, indent=1))
    return 0


def _mean(values) -> float | None:
    vals = [float(v) for v in values if isinstance(v, (int, float))]
    return round(sum(vals) / len(vals), 1) if vals else None


if __name__ == "__main__":
    sys.exit(main())
