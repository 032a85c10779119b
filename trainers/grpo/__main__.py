"""``python -m tir_envs.trainers.grpo --config FILE [section.key=value ...]``: train with GRPO.

Examples::

    python -m tir_envs.trainers.grpo --config trainers/grpo/configs/toy.yaml
    python -m tir_envs.trainers.grpo --config trainers/grpo/configs/zerotir_math.yaml \\
        model.path=/models/Qwen2.5-Math-1.5B rollout.backend=vllm train.steps=200
    python -m tir_envs.trainers.grpo --config zerotir_math --print-config   # "???": values to set
"""

from __future__ import annotations

import argparse
import json
import sys

from tir_envs.trainers.grpo.config import bundled_configs


def build_parser() -> argparse.ArgumentParser:
    bundled = ", ".join(bundled_configs())
    parser = argparse.ArgumentParser(
        prog="python -m tir_envs.trainers.grpo", description="Train a policy on a tir/* env with GRPO.",
        epilog=f"Bundled configs (trainers/grpo/configs, or pass just the name): {bundled}")
    parser.add_argument("--config", help="YAML/JSON config file, or a bundled config's name")
    parser.add_argument("--print-config", action="store_true",
                        help="print the resolved config as JSON and exit (values still to set "
                             "show as \"???\")")
    parser.add_argument("overrides", nargs="*", metavar="section.key=value",
                        help="override config values, e.g. optim.lr=1e-6 algorithm.kl_coef=0")
    return parser


def interrupted_message(trainer) -> str:
    """One line for Ctrl-C: where the run stopped and what a rerun resumes from."""
    from tir_envs.trainers.grpo.checkpoint import latest_checkpoint

    last = latest_checkpoint(trainer.out_dir / "checkpoints")
    saved = (f"last checkpoint: step {int(last.name.removeprefix('step_'))} ({last})"
             if last is not None else "no checkpoint saved yet")
    rerun = ("Rerun the same command to continue from it" if trainer.config.train.resume
             else "Rerun with train.resume=true to continue from it")
    return f"grpo: interrupted at step {trainer.step}; {saved}. {rerun}."



def main(argv: list[str] | None = None) -> int:
    from tir_envs.trainers.grpo.config import GRPOConfig, validate

    args = build_parser().parse_args(argv)
    try:
        config = GRPOConfig.load(args.config, args.overrides, check=not args.print_config)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.print_config:
        print(json.dumps(config.to_dict(), indent=2))
        try:
            validate(config)
        except ValueError as exc:
            print(f"note: not ready to train yet: {exc}", file=sys.stderr)
        return 0
    from tir_envs.trainers.grpo.trainer import GRPOTrainer

    from tir_envs.trainers.grpo.progress import StepReporter

    try:
        trainer = GRPOTrainer(config)
    except ValueError as exc:  # e.g. a resume with changed settings
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = StepReporter(trainer.step, config.train.steps)
    try:
        trainer.train(on_step=report)
    except KeyboardInterrupt:
        report.close()
        print(interrupted_message(trainer), file=sys.stderr, flush=True)
        return 130
    finally:
        report.close()
        trainer.close()
    from tir_envs.trainers.grpo.curve import save_curve
    from tir_envs.trainers.grpo.metrics import read_metrics

    paths = save_curve(read_metrics(trainer.logger.path), trainer.out_dir)
    print(f"metrics: {trainer.logger.path}\ncurve: {paths['svg']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
