"""``tir-envs rollout``: run episodes of an env against a policy and stream them to JSONL.

    tir-envs rollout --env tir/MathCode-v0 --policy hf:/models/qwen2.5-1.5b --out traj.jsonl
    tir-envs rollout --env tir/SQL-v0 --policy openai:http://127.0.0.1:8000/v1 --model qwen \\
        --samples 8 --concurrency 64 --out traj.jsonl

Policy specs: ``hf:PATH`` (transformers, local folder), ``vllm:PATH`` (vLLM engine in process),
``openai:URL`` (an OpenAI-compatible server; needs ``--model``), ``scripted:FILE`` (a JSON list
of action strings, replayed every episode), ``oracle``/``wrong`` (each task's gold, or a fixed
wrong answer, written as the env's protocol writes an answer: sanity checks, as in ``bench``).
The env gets the policy's tokenizer, so ids mean the same on both sides (``--tokenizer``
overrides; the default is the bundled Qwen2.5).  Your own env: ``--import MODULE`` imports the
module that registers it.  A rerun of an interrupted command resumes it
(``tir_envs.rollout.resume``).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from tir_envs.status import Status


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("rollout", help="run episodes against a policy, write JSONL",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", required=True, help="env id, e.g. tir/MathCode-v0")
    p.add_argument("--policy", required=True,
                   help="hf:PATH | vllm:PATH | openai:URL | scripted:FILE | oracle (each "
                        "task's gold, in the env's answer format: must be graded correct) | "
                        "wrong (a fixed wrong answer: must be graded wrong)")
    p.add_argument("--out", required=True, help="JSONL file the trajectories stream to")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --out file (by default a rerun of the same "
                        "command resumes it: finished episodes are not run again)")
    p.add_argument("--model", help="served model name (openai policy)")
    p.add_argument("--api-key", help="bearer token for the openai policy")
    p.add_argument("--tokenizer", help="tokenizer folder shared by env and policy")
    p.add_argument("--tasks", help="a dataset name the env ships (e.g. aime2024, hotpotqa, "
                                   "spider) or a tasks file (.jsonl/.parquet with 'question' "
                                   "and 'answer'); default: the env's own tasks")
    p.add_argument("--limit", type=positive_int, help="use only the first N tasks")
    p.add_argument("--samples", type=positive_int, default=1,
                   help="episodes per task (GRPO group size)")
    p.add_argument("--concurrency", type=positive_int, default=32, help="episodes in flight")
    p.add_argument("--mode", choices=["async", "sync"], default="async")
    p.add_argument("--max-tokens", type=positive_int, default=1024,
                   help="per turn (further capped by the env)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=-1)
    p.add_argument("--seed", type=int, help="reset seed and sampling seed (offset per episode)")
    p.add_argument("--timeout", type=positive_float,
                   help="seconds per episode before it is flagged")
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="env constructor argument (VALUE parsed as JSON when it can be)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_import_flag(p)
    p.set_defaults(func=run)
    return p


def add_import_flag(p: argparse.ArgumentParser) -> None:
    """``--import MODULE`` (repeatable): modules that register the user's own env ids."""
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import MODULE first, e.g. one that calls gymnasium.register for your "
                        "own env (found in the working directory, as with python -m)")


def _positive(cast: type, what: str):
    """An argparse ``type`` accepting numbers > 0 of type ``cast`` (one-line errors)."""
    def parse(text: str):
        try:
            value = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
        return value
    return parse


positive_int = _positive(int, "a positive integer")
positive_float = _positive(float, "a number of seconds > 0")


def check_env_and_out(args: argparse.Namespace) -> bool:
    """Fail on a wrong env id or output path now, before a model is loaded; whether ``--out``
    holds an interrupted run of this command to resume (``tir_envs.rollout.resume``)."""
    import gymnasium as gym

    from tir_envs.registry import env_class, import_modules

    import_modules(getattr(args, "imports", []))
    try:
        env_class(args.env)
    except gym.error.Error as exc:
        raise SystemExit(f"--env: {exc}") from None
    out = Path(args.out)
    if out.is_dir():
        raise SystemExit(f"--out {args.out!r} is a folder; name a .jsonl file")
    if not out.parent.is_dir():
        raise SystemExit(f"--out {args.out!r}: folder {str(out.parent)!r} does not exist")
    from tir_envs.rollout.resume import check_resume
    return check_resume(args)


def parse_env_args(pairs: list[str], flag: str = "--env-arg") -> dict[str, Any]:
    """``KEY=VALUE`` pairs as a dict, each VALUE parsed as JSON when it can be."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"{flag} {pair!r}: expected KEY=VALUE, e.g. {flag} max_turns=4")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def build_policy(args: argparse.Namespace):
    """``(policy, tokenizer)`` from ``--policy`` and its flags (``tir_envs.rollout.specs``)."""
    from tir_envs.rollout.gold import KINDS, GoldPolicy
    from tir_envs.rollout.specs import PolicySpecError
    from tir_envs.rollout.specs import build_policy as from_spec

    if args.policy in KINDS:
        policy = GoldPolicy(args.policy, args.tokenizer)
        return policy, policy.tokenizer
    try:
        return from_spec(args.policy, tokenizer=args.tokenizer, model=args.model,
                         api_key=args.api_key)
    except PolicySpecError as exc:
        raise SystemExit(f"--policy {exc.spec!r}: {exc.problem}") from None


#: suffixes that make ``--tasks`` a file, never a dataset name
TASK_FILE_SUFFIXES = (".jsonl", ".json", ".parquet")


def load_tasks(args: argparse.Namespace, env_kwargs: dict[str, Any]):
    """The ``tasks`` argument of ``collect``.  A dataset name (no such file) goes to the env,
    whose own loader knows its shipped names and says which exist; ``--limit`` then takes
    the first N of them."""
    if args.tasks is None:
        return args.limit  # None: all the env's tasks; N: the first N
    path = Path(args.tasks)
    if not path.exists():
        if path.suffix in TASK_FILE_SUFFIXES:
            raise SystemExit(f"--tasks {args.tasks!r}: no such file")
        if "tasks" in env_kwargs:
            raise SystemExit(f"--tasks {args.tasks!r} and --env-arg tasks=...: give one of them")
        env_kwargs["tasks"] = args.tasks
        return args.limit
    from tir_envs.data.loaders import read_records

    records = read_records(args.tasks, required=())
    return records[:args.limit] if args.limit else records


def _warm_sandbox(env_id: str, env_kwargs: dict[str, Any]) -> None:
    """The env's sandbox pool starts now, while the policy and tokenizer load."""
    from tir_envs.envs.tooling import warm_sandbox
    from tir_envs.registry import env_class

    try:
        warm_sandbox(env_class(env_id), env_kwargs)
    except (ValueError, TypeError):
        pass  # bad backend settings: the env's own construction reports them


def run(args: argparse.Namespace) -> int:
    from tir_envs.rollout import resume
    from tir_envs.rollout.engine import collect
    from tir_envs.rollout.policy import SamplingParams

    resuming = check_env_and_out(args)
    env_kwargs = parse_env_args(args.env_arg)
    _warm_sandbox(args.env, env_kwargs)
    policy, tokenizer = build_policy(args)
    env_kwargs.setdefault("tokenizer", tokenizer)
    tasks = load_tasks(args, env_kwargs)
    sampling = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature,
                              top_p=args.top_p, top_k=args.top_k, seed=args.seed)
    skip = resume.start(args, resuming)
    try:
        with open(args.out, "a", encoding="utf-8") as sink:
            out = collect(args.env, policy, tasks, samples_per_task=args.samples,
                          max_concurrency=args.concurrency, sampling=sampling,
                          episode_timeout_s=args.timeout, out=sink,
                          progress=not args.no_progress, mode=args.mode,
                          env_kwargs=env_kwargs, seed=args.seed, skip=skip)
    except KeyboardInterrupt:
        command = shlex.join(["tir-envs", *getattr(args, "argv", ["rollout", "..."])])
        print(f"tir-envs rollout: interrupted: {resume.saved_count(args.out)} episodes are saved "
              f"in {args.out}; resume with:\n  {command}", file=sys.stderr)
        return 130
    except Exception:
        if not resuming:
            resume.discard_if_empty(args.out)  # a run that never started leaves no file
        raise
    finally:
        close = getattr(policy, "close", None)
        if close is not None:
            close()
    if skip:  # the figures are the whole file's: the earlier sessions' episodes and these
        from tir_envs.trajectory import read_jsonl
        out = type(out)(read_jsonl(args.out), out.stats)
    rewards = [t.reward for t in out if not t.infra_failed]
    summary = {**out.stats.to_dict(), "out": args.out,
               "mean_reward": sum(rewards) / len(rewards) if rewards else None}
    if skip:
        summary["resumed"] = len(skip)  # episodes an earlier, interrupted run saved
        summary["episodes_in_out"] = len(out)
    print(json.dumps(summary))
    failed = [t for t in out if t.infra_failed]
    if failed:
        what = "all" if len(failed) == len(out) else f"{len(failed)} of"
        print(f"tir-envs rollout: {'error' if what == 'all' else 'warning'}: {what} "
              f"{len(out)} episodes failed (first: {failure_line(failed[0])}); they are in "
              f"{args.out}, flagged infra_failed", file=sys.stderr)
    return 1 if failed and len(failed) == len(out) else 0


def failure_line(traj: Any) -> str:
    """What went wrong in a flagged episode, in one line."""
    failure = traj.failure
    if failure is not None:
        return " ".join(f"{failure.kind}: {failure.message}".split())[:300]
    bad = next((t for t in traj.turns if t.status == Status.INFRA_ERROR), None)
    return f"a tool failed (infra_error) at turn {bad.index}" if bad else "flagged infra_failed"
