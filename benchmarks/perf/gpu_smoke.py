"""GPU smoke run: the bundled GRPO trainer and TRL's ``GRPOTrainer`` side by side on one card,
like for like, against a plain language-model step in the same run.

Prints JSON.  One prepared script for a lent GPU machine (no hub, no vLLM: every model is built
from its config in code with random weights, in the shapes of Qwen2.5-0.5B and 1.5B).  Every
part runs the same ``WORKLOAD``: the same training problems (``tir/MathCode-v0``, ToRL protocol,
generated problems), the same episodes per step (prompts x samples), the same per-action token
cap, the same number of steps, the same precision (bf16 weights on a GPU, fp32 on a CPU), each
model generating through its own ``generate`` (HF backend) and the real sandbox:

* ``lm_step``: the baseline, no env: ``generate`` for the same number of sequences and tokens,
  then one forward/backward/AdamW step on them;
* ``grpo``: the bundled trainer;
* ``trl``: TRL's ``GRPOTrainer`` with the adapter's ``rollout_func`` (in this interpreter when
  TRL is importable, else in the checkout's ``.venv-trl``; otherwise reported as skipped).

Each reports policy tokens per step, tokens/s of the whole step and of each phase (rollout:
sampling and tools; update: log-probs, loss, backward, optimizer), tool calls run, and peak
memory (GPU: the allocator's peak; CPU: peak RSS); ``ratios`` divides each trainer's tokens/s by
the baseline's.

The policy calls the tool: random weights never write a code block, so the weights are set by
hand (``program_bigram``) into a bigram table in the real shape (every matmul runs at full size;
the layers' output projections are zero, so each position's logits depend on its token alone,
and the ``lm_head`` is untied, which adds the embedding's size to the parameters).  Each episode
writes ``filler`` tokens of "thinking" (a chain of distinct word tokens, so the first action is
about ``--max-tokens`` long), then a ``python`` block and the ToRL stop ```` ```output ````; the
sandbox runs it; after the output the policy answers ``\\boxed{42}`` and ends its turn.  The
model is saved once per shape and every part loads that checkpoint.  ``tool_calls`` counts the
calls the sandbox ran.  No GPU was lent when this was written: the script has run only in its
CPU quick mode.  ``PERF_QUICK=1`` (``make perf-smoke``) runs a tiny
shape on CPU so the script cannot rot; its figures say it runs, not how fast.
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
from tir_envs.bench.perf.quick import QUICK  # noqa: E402
from tir_envs.bench.perf.trainer import PRESETS  # noqa: E402

SHAPES = ("qwen2.5-0.5b", "qwen2.5-1.5b")
#: the one workload every part runs (GPU; a CPU run halves the prompts)
WORKLOAD = {"prompts": 4, "samples": 4}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", default=",".join(SHAPES))
    p.add_argument("--parts", default="lm_step,grpo,trl")
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
    from tir_envs.trainers.common.training_data import main as training_data

    path = folder / "math_train.jsonl"
    if not path.exists():
        training_data(["math", "--n", str(n), "--out", str(path)])
    return path


def peak_mem_mb() -> float:
    import torch

    if torch.cuda.is_available():
        return round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def workload(gpu: bool) -> dict:
    return {**WORKLOAD, "prompts": WORKLOAD["prompts"] if gpu else 2}


#: the tool-calling action (token by token, every token distinct; the ToRL stop at its end)
CODE_ACTION = ["``", "`", "python", "\n", "print", "(", "6", "*", "7", ")\n", "```", "\n\n",
               " ```", "output"]
#: the answer after the tool's output, then the end of turn
ANSWER = ["\\", "boxed", "{", "4", "2", "}"]


def program_bigram(model, chain: dict[int, list[int]], default: int, sharpness: float = 40.0):
    """Set ``model``'s weights (a ``Qwen2ForCausalLM`` with an untied head) so that it samples
    ``chain[t]`` after token ``t`` (even odds among several) and ``default`` after any token
    ``chain`` does not name.  Why this works: with every layer's ``o_proj`` and ``down_proj``
    zero the residual stream is the token's embedding; the embeddings are random unit vectors,
    plus one coordinate that only the tokens outside ``chain`` have; the head's row for each
    successor points along its predecessors' embeddings."""
    import torch

    hidden = model.config.hidden_size
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        emb = model.model.embed_tokens.weight
        emb.copy_(torch.nn.functional.normalize(torch.randn_like(emb, dtype=torch.float32),
                                                dim=-1).to(emb.dtype))
        emb[:, 0] = 1.0
        emb[list(chain), 0] = 0.0
        head = model.lm_head.weight
        head.zero_()
        head[default, 0] = sharpness / (hidden / 2) ** 0.5  # after the RMSNorm's rescale
        for cur, nexts in chain.items():
            for nxt in nexts:
                head[nxt] += sharpness / hidden ** 0.5 * emb[cur]
    return model


def tool_chain(tok, filler: int) -> tuple[dict[int, list[int]], int]:
    """The transitions of the tool-calling policy (see the module docstring) and its default
    (the first token it writes after the prompt)."""
    def one(text: str) -> int:
        (i,) = tok.encode(text, add_special_tokens=False)
        return i

    code = [one(t) for t in CODE_ACTION]
    answer = [one(t) for t in ANSWER] + [tok.eos_token_id]
    after_output = tok.encode("\n```\n", add_special_tokens=False)[-1]  # the env's last token
    used = set(code) | set(answer) | {after_output}
    words = [i for i in range(1000, len(tok)) if i not in used
             and tok.decode([i]).startswith(" ") and tok.decode([i])[1:].isalpha()][:filler]
    seq = words + code
    chain = {a: [b] for a, b in zip(seq, seq[1:])}
    chain.update({a: [b] for a, b in zip([after_output] + answer, answer)})
    assert len(chain) == len(seq) - 1 + len(answer), "a token with two successors"
    return chain, seq[0]


def build_model(shape: str, gpu: bool, tok, filler: int):
    """The tool-calling model every part loads: same shape, seed and precision."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    fields = {**model_fields(shape, gpu), "eos_token_id": tok.eos_token_id,
              "pad_token_id": tok.pad_token_id, "tie_word_embeddings": False}
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**fields))
    program_bigram(model, *tool_chain(tok, filler))
    return model.to(torch.bfloat16 if gpu else torch.float32)


def save_model(shape: str, gpu: bool, max_tokens: int, folder: Path) -> Path:
    """Build the model once and save it, with the tokenizer, for every part to load."""
    from tir_envs.tokenizer import load_tokenizer

    tok = load_tokenizer(None)
    path = folder / f"model-{shape}"
    build_model(shape, gpu, tok, filler=max(0, max_tokens - len(CODE_ACTION) - 1)
                ).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def load_model(folder: Path, shape: str, gpu: bool):
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(
        folder / f"model-{shape}", dtype=torch.bfloat16 if gpu else torch.float32)


def run_lm_step(shape: str, steps: int, max_tokens: int, folder: Path) -> dict:
    """The baseline: the same sequences through ``generate`` (no env, no stops) and one plain
    causal-LM training step on what it wrote, per step."""
    import torch

    from tir_envs.data.math.loader import load_math_tasks
    from tir_envs.tokenizer import load_tokenizer

    gpu = torch.cuda.is_available()
    device = "cuda" if gpu else "cpu"
    tok = load_tokenizer(None)
    model = load_model(folder, shape, gpu).to(device)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-6)
    w = workload(gpu)
    tasks = load_math_tasks(str(tasks_file(folder, 64)))[:w["prompts"]]
    prompts = [t.question for t in tasks for _ in range(w["samples"])]
    tok.padding_side = "left"
    batch = tok(prompts, return_tensors="pt", padding=True).to(device)
    rollout_s = update_s = 0.0
    tokens = 0
    for _ in range(steps):
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(**batch, max_new_tokens=max_tokens, do_sample=True,
                                 pad_token_id=tok.pad_token_id)
        _sync(gpu)
        t1 = time.perf_counter()
        new = out[:, batch["input_ids"].shape[1]:]
        tokens += int((new != tok.pad_token_id).sum())
        attn = (out != tok.pad_token_id).long()
        labels = out.masked_fill(attn == 0, -100)
        loss = model(input_ids=out, attention_mask=attn, labels=labels).loss
        loss.backward()
        optim.step()
        optim.zero_grad()
        _sync(gpu)
        rollout_s += t1 - t0
        update_s += time.perf_counter() - t1
    return _figures(steps, tokens, rollout_s, update_s, tool_calls=0)


def run_grpo(shape: str, steps: int, max_tokens: int, folder: Path) -> dict:
    import torch

    from tir_envs.trainers.grpo.config import GRPOConfig
    from tir_envs.trainers.grpo.trainer import GRPOTrainer

    gpu = torch.cuda.is_available()
    w = workload(gpu)
    config = GRPOConfig.load(None, [
        f"model.path={folder / ('model-' + shape)}", "model.tokenizer=qwen2.5",
        f"model.dtype={'bf16' if gpu else 'fp32'}",  # bf16 weights, as TRL's bf16 run
        "env.id=tir/MathCode-v0", f"env.kwargs={json.dumps({'protocol': 'torl'})}",
        f"data.path={tasks_file(folder, 64)}", "data.loader=tir_envs.data.math:load_math_tasks",
        f"rollout.samples_per_task={w['samples']}", f"rollout.tasks_per_step={w['prompts']}",
        f"rollout.max_tokens={max_tokens}", f"train.steps={steps}", "train.save_every=0",
        f"train.output_dir={folder / ('grpo-' + shape)}", "train.tensorboard=false",
        "train.resume=false", f"algorithm.micro_batch_size={w['samples']}"])
    trainer = GRPOTrainer(config)
    history = trainer.train()
    trainer.close()
    rollout_s = sum(h["time/rollout_s"] for h in history)
    update_s = sum(h["time/update_s"] for h in history)
    tokens = sum(h["throughput/rollout_tokens_per_s"] * h["time/rollout_s"] for h in history)
    calls = sum(h.get("tool_calls_per_episode", 0.0) * w["prompts"] * w["samples"]
                for h in history)
    return _figures(len(history), tokens, rollout_s, update_s, tool_calls=round(calls))


def run_trl(shape: str, steps: int, max_tokens: int, folder: Path) -> dict:
    import torch

    from tir_envs.data.math.loader import load_math_tasks
    from tir_envs.tokenizer import load_tokenizer
    from tir_envs.trainers.trl.train import build_trainer, device_defaults

    gpu = torch.cuda.is_available()
    w = workload(gpu)
    tok = load_tokenizer(None)
    model = load_model(folder, shape, gpu)
    tasks = [{"id": t.id, "question": t.question, "answer": t.answer}
             for t in load_math_tasks(str(tasks_file(folder, 64)))]
    episodes = w["prompts"] * w["samples"]  # one generation batch = one step's episodes
    trainer = build_trainer(
        "tir/MathCode-v0", {"protocol": "torl", "tasks": tasks}, model, tok,
        [t["id"] for t in tasks[:w["prompts"] * steps]], output_dir=str(folder / f"trl-{shape}"),
        max_steps=steps, num_generations=w["samples"], per_device_train_batch_size=episodes,
        max_completion_length=max_tokens, report_to=[], logging_steps=1, save_strategy="no",
        **device_defaults())
    outs, rollout_s = [], [0.0]
    inner = trainer.rollout_func

    def timed(prompts, tr):
        t0 = time.perf_counter()
        outs.append(inner(prompts, tr))
        _sync(gpu)
        rollout_s[0] += time.perf_counter() - t0
        return outs[-1]

    trainer.rollout_func = timed
    t0 = time.perf_counter()
    trainer.train()
    _sync(gpu)
    wall = time.perf_counter() - t0
    tokens = sum(sum(m) for out in outs for m in out["env_mask"])
    # ToRL: every action after the first follows an executed call
    calls = sum(max(0, len(turns) - 1) for out in outs for turns in out["tir_turn_rewards"])
    return _figures(trainer.state.global_step, tokens, rollout_s[0], wall - rollout_s[0],
                    tool_calls=calls)


def _sync(gpu: bool) -> None:
    if gpu:
        import torch
        torch.cuda.synchronize()


def _figures(steps: int, tokens: float, rollout_s: float, update_s: float,
             tool_calls: float | None) -> dict:
    """Tokens/s of the whole step and of each phase, from policy tokens and phase seconds."""
    whole = rollout_s + update_s
    rate = (lambda t: round(tokens / t, 1) if t > 0 else None)
    return {"steps": steps, "policy_tokens": int(tokens), "rollout_s": round(rollout_s, 3),
            "update_s": round(update_s, 3), "tokens_per_s": {"step": rate(whole),
            "rollout": rate(rollout_s), "update": rate(update_s)},
            "tool_calls": tool_calls, "peak_mem_mb": peak_mem_mb()}


def child(part: str, shape: str, args: argparse.Namespace, folder: Path) -> dict:
    run = {"lm_step": run_lm_step, "grpo": run_grpo, "trl": run_trl}[part]
    return run(shape, args.steps, args.max_tokens, folder)


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
            real = shape if gpu else "qwen2.5-0.5b"
            save_model(real, gpu, args.max_tokens, Path(tmp))
            results[shape] = {p: run_part(p, real, args, Path(tmp))
                              for p in args.parts.split(",")}
    for parts in results.values():
        parts["ratios"] = ratios(parts)
    out = {"benchmark": "gpu_smoke", "device": torch.cuda.get_device_name(0) if gpu else "cpu",
           "shapes": shapes, "max_tokens": args.max_tokens, "steps": args.steps,
           "workload": {**workload(gpu), "precision": "bf16" if gpu else "fp32"},
           "note": None if gpu else "CPU: a tiny shape; the figures only show the script runs",
           "results": results, "load": os.getloadavg()}
    print(json.dumps(out, indent=1))
    return 0


def ratios(parts: dict) -> dict:
    """Each trainer's tokens/s over the plain LM step's, per phase (same run, same card)."""
    base = (parts.get("lm_step") or {}).get("tokens_per_s") or {}
    out = {}
    for name in ("grpo", "trl"):
        mine = (parts.get(name) or {}).get("tokens_per_s") or {}
        out[name] = {k: round(mine[k] / base[k], 3) if mine.get(k) and base.get(k) else None
                     for k in ("step", "rollout", "update")}
    return out


if __name__ == "__main__":
    sys.exit(main())
