"""Judge rewards in the GRPO loop: grouped verdicts after each rollout, judge cost per step.

An env whose reward is a grouped ``JudgeReward`` (``mode="scores"`` or ``"ranking"``) leaves
each answer pending; the trainer then judges each group's answers in one call
(``JudgeReward.ajudge_groups``) before advantages are formed.  A pointwise judge needs nothing
here: the env scored each episode.  Either way the step's metrics gain the judge's calls,
tokens, cache hit rate, failures and errors (``judge/*``), counted over that step.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from tir_envs.trajectory import Trajectory


def judge_of(envs: Iterable[Any]) -> Any:
    """The judge reward of the run's envs (they share one factory), or ``None``."""
    for env in envs:
        reward = getattr(getattr(env, "unwrapped", env), "reward", None)
        if getattr(reward, "judged", False) and hasattr(reward, "client"):
            return reward
    return None


def judge_pending(judge: Any, groups: Sequence[Sequence[Trajectory]]) -> None:
    """Grouped verdicts for every group that has pending answers."""
    if judge is not None and judge.grouped:
        judge.judge_groups(groups)


class JudgeMeter:
    """``judge/*`` metrics of one step: the judge client's counters since the last call."""

    KEYS = ("requests", "calls", "cache_hits", "failures", "errors", "prompt_tokens",
            "completion_tokens", "call_seconds")

    def __init__(self) -> None:
        self.last: dict[str, float] = {}

    def step(self, judge: Any) -> dict[str, float]:
        if judge is None:
            return {}
        now = judge.client.stats.to_dict()
        delta = {k: now[k] - self.last.get(k, 0) for k in self.KEYS}
        self.last = {k: now[k] for k in self.KEYS}
        out = {f"judge/{k}": float(v) for k, v in delta.items()}
        out["judge/tokens"] = delta["prompt_tokens"] + delta["completion_tokens"]
        out["judge/cache_hit_rate"] = delta["cache_hits"] / delta["requests"] \
            if delta["requests"] else 0.0
        return out
