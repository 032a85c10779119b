"""One JSON record per finished sample: the verdict, the tool and cost figures, the ledger.

Records are what ``samples.jsonl`` holds and what every metric is computed from, so a report
can be rebuilt (or two runs compared) from the run folder alone.
"""

from __future__ import annotations

from typing import Any

from tir_envs.bench.judging import judge_figures
from tir_envs.status import Status
from tir_envs.task import Task
from tir_envs.trajectory import Trajectory

#: task meta copied into each record (what scoring needs besides the ledger)
_META_KEYS = ("domain", "tool", "db_path", "dataset", "instruction_id_list", "kwargs")
#: other task fields kept for breakdowns (``--by FIELD``: MATH-500's level and subject,
#: HotpotQA's type and level, Spider's db_id): short scalars only, never a worked solution
_SHORT_TEXT = 64


def record_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """The task fields a record keeps: what scoring needs, and short scalar fields."""
    kept = {k: meta[k] for k in _META_KEYS if k in meta}
    for key, value in meta.items():
        if key not in kept and (isinstance(value, (bool, int, float)) or
                                (isinstance(value, str) and len(value) <= _SHORT_TEXT)):
            kept[key] = value
    return kept


def verdict(traj: Trajectory) -> tuple[bool, bool, str | None]:
    """``(correct, answered, answer)`` from the trajectory's typed outcome fields.

    The reward's named components are read only for a reward that does not fill the typed
    fields yet (``correct``/``has_answer``, the names every shipped reward logs).
    """
    parts = traj.reward_components
    correct = traj.correct if traj.correct is not None else bool(parts.get("correct", 0.0))
    answered = traj.answered if traj.answered is not None else bool(parts.get("has_answer", 0.0))
    answer = traj.answer if traj.answer is not None else traj.metadata.get("answer")
    if not answered:
        answer = None
    return bool(correct), bool(answered), answer


def tool_figures(traj: Trajectory) -> dict[str, Any]:
    """Executed calls by tool, invalid calls, tool errors and each executed call's latency."""
    attempts = invalid = errors = infra = 0
    latencies = []
    for turn in traj.turns:
        for r in turn.tool_results:
            attempts += 1
            if r.get("parse_error") or r.get("unknown_tool"):
                invalid += 1
            if r.get("executed"):
                latencies.append(float(r.get("latency_s") or 0.0))
                status = Status(r.get("status", "ok"))
                errors += status.failed
                infra += status is Status.INFRA_ERROR
    return {"tool_counts": traj.tool_counts(), "tool_calls": traj.num_tool_calls,
            "call_attempts": attempts, "invalid_calls": invalid, "tool_errors": errors,
            "infra_errors": infra, "tool_latency_s": latencies}


def _gold(answer: Any) -> Any:
    """The task's gold answer as JSON can hold it (for reports and the trajectory viewer)."""
    return answer if isinstance(answer, (str, int, float, bool, list, dict)) or answer is None \
        else str(answer)


def sample_record(suite: str, part: str, item: int, sample: int, seed: int | None, task: Task,
                  traj: Trajectory) -> dict[str, Any]:
    """The ``samples.jsonl`` record of one finished sample."""
    correct, answered, answer = verdict(traj)
    return {
        "suite": suite, "part": part, "item": item, "sample": sample, "seed": seed,
        "task_id": task.id, "gold": _gold(task.answer), "meta": record_meta(task.meta),
        "correct": correct, "answered": answered, "answer": answer,
        "reward": traj.reward, "components": dict(traj.reward_components),
        **tool_figures(traj),
        "response_tokens": traj.num_policy_tokens, "turns": len(traj.turns),
        "wall_s": float(traj.metadata.get("episode_s", 0.0)),
        "stop_reason": traj.stop_reason, "infra_failed": bool(traj.infra_failed),
        **served_figures(traj), **judge_figures(traj.metadata),
        "trajectory": traj.to_dict(),
    }


def served_figures(traj: Trajectory) -> dict[str, Any]:
    """An as-served sample's drift (``tir_envs.chat.served``): tokens where the re-rendered
    prompts differed from the ledger, over the episode's generations; nothing otherwise."""
    served = traj.metadata.get("served")
    if not served:
        return {}
    return {"served_drift_tokens": int(served["drift_tokens"]),
            "served_drifted_turns": int(served["drifted_turns"]),
            "served_turns": len(served["turns"])}
