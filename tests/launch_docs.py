"""The launch commands the adapter docs show, read back out of the Markdown so a test can hand
each to the framework's own parser: what a user copies is what is checked."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
_BLOCK = re.compile(r"```bash\n(.*?)```", re.S)


def bash_blocks(doc: str) -> list[str]:
    return _BLOCK.findall((DOCS / doc).read_text(encoding="utf-8"))


def _command_lines(block: str) -> list[str]:
    """The block's commands: continuation lines joined, comments dropped, a newline inside
    quotes (a JSON argument over several lines) kept inside its command."""
    out, current, quote = [], [], None
    text = re.sub(r"\\\n", " ", block)
    i = 0
    while i < len(text):
        ch = text[i]
        if quote is None and ch == "#" and (i == 0 or text[i - 1] in " \n"):
            while i < len(text) and text[i] != "\n":  # a comment runs to the end of its line
                i += 1
            continue
        if quote is None and ch in "'\"":
            quote = ch
        elif ch == quote and text[i - 1] != "\\":
            quote = None
        if ch == "\n" and quote is None:
            out.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    out.append("".join(current))
    return [c.strip() for c in out if c.strip()]


def commands(doc: str, marker: str) -> list[list[str]]:
    """Every command in ``doc``'s bash blocks that contains ``marker``, as argv after it
    (shell variables left as they are)."""
    out = []
    for block in bash_blocks(doc):
        for line in _command_lines(block):
            if marker in line:
                out.append(shlex.split(line.split(marker, 1)[1]))
    return out


def full_commands(doc: str, marker: str) -> list[list[str]]:
    """Like ``commands``, the whole argv (environment assignments and the program included)."""
    return [shlex.split(line) for block in bash_blocks(doc) for line in _command_lines(block)
            if marker in line]



def verl_cpu_scale(train_batch_size: int, ppo_mini_batch_size: int) -> list[str]:
    """The one place the CPU runs of the verl launches scale them down, sizes and devices only:
    one CPU "GPU", two samples per prompt, mini-batches of one prompt and as many prompts as
    keep the launch's optimizer steps per batch (ToRL's 128 / 64: two), micro-batches of one.
    docs/verl.md names this function; everything else (algorithm, lengths, agent file, env,
    trainer mode) is the doc's own."""
    steps = max(1, train_batch_size // ppo_mini_batch_size)
    return [
        "trainer.n_gpus_per_node=1", "trainer.nnodes=1",
        f"data.train_batch_size={steps}", "actor_rollout_ref.rollout.n=2",
        "actor_rollout_ref.actor.ppo_mini_batch_size=1",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    ]


def with_overrides(argv: list[str], overrides: list[str]) -> list[str]:
    """``argv`` with each ``key=value`` of ``overrides`` replacing the same key (Hydra refuses a
    key given twice), added where absent."""
    keys = {o.split("=", 1)[0] for o in overrides}
    return [a for a in argv if a.split("=", 1)[0] not in keys] + list(overrides)


#: the per-device batch of the CPU TRL launches: two ranks of four episodes make one group of
#: eight (``--num-generations``), so the group spans both ranks as TRL's sampler lays it out
TRL_CPU_BATCH = 4


def trl_cpu_scale(argv: list[str], model: str, data: str, tasks: str) -> list[str]:
    """The one place the CPU runs of docs/trl.md's ``accelerate launch`` commands scale them
    down, sizes and devices only: two processes in fp32 (``accelerate launch``'s own
    ``--num_processes``/``--mixed_precision`` flags, ahead of the config file's values), the
    test's model, data and task file, one step, eight episodes per prompt, four per rank,
    completions of 16 tokens, generation by ``transformers`` (vLLM's CUDA kernels do not run
    here), and TRL's table of the step's completions printed.  Everything else (the accelerate
    config file, env, protocol, learning rate, ``beta``, gradient checkpointing) is the doc's
    own.  docs/trl.md names this function."""
    import json

    launch, script = argv[:argv.index("tir_envs.trainers.trl.train") + 1], argv[argv.index(
        "tir_envs.trainers.trl.train") + 1:]
    launch = [launch[0], launch[1], "--num_processes", "2", "--mixed_precision", "no",
              *launch[2:]]
    flags = dict(zip(script[::2], script[1::2]))
    env_kwargs = {**json.loads(flags["--env-kwargs"]), "tasks": tasks}
    grpo = {**json.loads(flags.get("--grpo", "{}")), "per_device_train_batch_size": TRL_CPU_BATCH,
            "gradient_accumulation_steps": 1, "max_completion_length": 16, "report_to": [],
            "save_strategy": "no", "logging_steps": 1, "log_completions": True}
    flags.update({"--env-kwargs": json.dumps(env_kwargs), "--model": model, "--data": data,
                  "--generate": "transformers", "--steps": "1", "--num-generations": "8",
                  "--grpo": json.dumps(grpo)})
    return launch + [x for kv in flags.items() for x in kv]
