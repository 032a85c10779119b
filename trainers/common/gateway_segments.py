"""One sample per gateway episode, for trainers whose groups have a fixed size.

TRL (``rewards.view(-1, num_generations)``) and OpenRLHF (``rewards.reshape(-1,
n_samples_per_prompt)``) group samples by position, one per generation of a prompt, so an
episode must give exactly one sample.  A gateway episode gives one segment unless the client
rewrote its history (a fork: docs/gateway.md), and then several, which such a group cannot
hold.  ``on_fork="error"`` refuses the episode with what forked it and the ways out;
``on_fork="last"`` keeps the last segment (the one holding the final answer) and says how many
were left out.
"""

from __future__ import annotations

from typing import Any

from tir_envs.trajectory import Trajectory

FORK_RULES = ("error", "last")


def check_fork_rule(on_fork: str, rules: tuple[str, ...] = FORK_RULES) -> str:
    if on_fork not in rules:
        raise ValueError(f"on_fork must be one of {list(rules)}, got {on_fork!r}")
    return on_fork


def own_segments(result: Any, trainer: str) -> list[Trajectory]:
    """The segments of the episode's own conversation, in order (a side conversation, such
    as a harness's title call, is no sample of the episode)."""
    segments = [t for t in result.trajectories
                if not (t.metadata.get("gateway") or {}).get("side")]
    if not segments:
        raise ValueError(f"gateway episode {result.key_id} has no segment (the agent made no "
                         f"call: {result.error or 'no error'}); {trainer} needs one sample per "
                         "generation")
    return segments


def one_segment(result: Any, on_fork: str, trainer: str) -> tuple[Trajectory, int]:
    """The episode's sample and the number of its segments left out (see the docstring)."""
    segments = own_segments(result, trainer)
    if len(segments) > 1 and on_fork == "error":
        why = next((f.reason for f in result.forks if f.rewrite), "several segments")
        raise ValueError(
            f"gateway episode {result.key_id} (task {result.task!r}) forked into "
            f"{len(segments)} segments ({why}); {trainer} groups one sample per generation, "
            "so pass on_fork='last' to train on each episode's last segment, make the agent "
            "send history back unchanged, or use the bundled GRPO trainer or verl, which take "
            "every segment")
    return segments[-1], len(result.trajectories) - 1


def task_for(tasks: Any, label: Any) -> Any:
    """The task a dataset label names: ``tasks`` a mapping or ``label -> task``; ``None``: the
    label itself is the task."""
    if tasks is None:
        return label
    if callable(tasks):
        return tasks(label)
    if label not in tasks:
        raise KeyError(f"no task for the dataset label {label!r}: the tasks mapping has "
                       f"{len(tasks)} labels (the dataset's prompt/label column must hold them)")
    return tasks[label]
