"""Example: GRPO on a ``tir/*`` env with TRL's ``GRPOTrainer`` and the adapter's rollout function.

    python -m tir_envs.trainers.common.training_data math --out math_train.jsonl
    python -m tir_envs.trainers.trl.dataset --env tir/MathCode-v0 --tasks math_train.jsonl --out train.jsonl
    python -m tir_envs.trainers.trl.train --env tir/MathCode-v0 \\
        --env-kwargs '{"protocol": "torl", "tasks": "math_train.jsonl"}' \\
        --model Qwen/Qwen2.5-Math-1.5B --data train.jsonl --generate vllm --steps 300

``--env-kwargs`` must name the task set the dataset's labels come from (``tasks``), unless the
dataset was written with ``--inline``.  Other ``GRPOConfig`` fields go in ``--grpo`` as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Mapping, Sequence

from tir_envs.trainers.trl.rollout import env_reward, make_rollout_func


def build_trainer(env_id: str, env_kwargs: Mapping[str, Any], model: Any, tokenizer: Any,
                  labels: Sequence[str], generate: Any = "transformers", **grpo: Any):
    """A ``GRPOTrainer`` whose completions are episodes of ``env_id`` (one per task label in
    ``labels``, ``num_generations`` episodes per label) and whose reward is the env's."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    return GRPOTrainer(
        model=model, processing_class=tokenizer, reward_funcs=[env_reward],
        args=GRPOConfig(**grpo), train_dataset=Dataset.from_list([{"prompt": x} for x in labels]),
        rollout_func=make_rollout_func(env_id, generate=generate, **dict(env_kwargs)))


def device_defaults() -> dict[str, Any]:
    """What the machine allows: bf16 on a GPU; on a CPU no bf16 (TRL's default, which a CPU
    run refuses) and ``use_cpu``.  ``--grpo`` overrides either."""
    import torch

    if torch.cuda.is_available():
        return {"bf16": True}
    return {"bf16": False, "use_cpu": True}


def model_dtype(grpo: Mapping[str, Any]) -> Any:
    """Load the weights in bf16 when training in bf16 (not fp32 and then cast: half the
    memory at load), else fp32."""
    import torch

    return torch.bfloat16 if grpo.get("bf16") else torch.float32


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tir_envs.trainers.trl.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", required=True)
    parser.add_argument("--env-kwargs", default="{}", help="JSON object of env arguments")
    parser.add_argument("--model", required=True, help="model folder or hub name")
    parser.add_argument("--data", required=True, help="JSONL from python -m tir_envs.trainers.trl.dataset")
    parser.add_argument("--generate", default="transformers", choices=["transformers", "vllm"])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--num-generations", type=int, default=8)
    parser.add_argument("--output-dir", default="runs/trl")
    parser.add_argument("--grpo", default="{}", help="JSON object of further GRPOConfig fields")
    return parser


def grpo_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The ``GRPOConfig`` fields a command line asks for: its flags, the machine's precision,
    then ``--grpo`` (which overrides both)."""
    return {"output_dir": args.output_dir, "max_steps": args.steps,
            "num_generations": args.num_generations, "use_vllm": args.generate == "vllm",
            **device_defaults(), **json.loads(args.grpo)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with open(args.data, encoding="utf-8") as f:
        labels = [json.loads(line)["prompt"] for line in f if line.strip()]
    grpo = grpo_settings(args)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=model_dtype(grpo))
    trainer = build_trainer(args.env, json.loads(args.env_kwargs), model,
                            AutoTokenizer.from_pretrained(args.model), labels,
                            generate=args.generate, **grpo)
    trainer.train()
    return 0


if __name__ == "__main__":
    sys.exit(main())
