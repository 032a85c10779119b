"""Judged suites: a suite whose answers an LLM judge grades (``Suite.judge`` names the rubric).

``hotpotqa-judged`` grades HotpotQA answers by equivalence with the gold aliases, so a right
paraphrase ("the Home Rule League" for "Home Rule League party") counts where exact match
refuses it; ``autotir-judged`` does the same for the open-ended (free-form knowledge QA) items
of AutoTIR's table through ``tir/AutoTIR-v0`` (its tool-choice term is the ``autotir``
suite's: the judged variant grades the answer alone).  The run's judge comes from
``--judge SPEC`` (``hf:PATH``, ``vllm:PATH``, ``openai:URL`` with ``--judge-model``; a policy
object in ``tir_envs.bench.run``), built once and shared by every episode.  Each sample's record
carries the judge's tokens, cache use and failures; the report sums them per suite.
"""

from __future__ import annotations

from typing import Any

from tir_envs.judge import JudgeClient, JudgeReward, Rubric

#: rubrics a suite may name
RUBRICS = {"equivalence": Rubric.equivalence}


def check_judge(judged: list[str], config: Any) -> None:
    """A run with judged suites needs a judge, and runs in this process."""
    if not judged:
        return
    if config.judge is None:
        raise ValueError(f"suite(s) {', '.join(judged)} are graded by an LLM judge: pass "
                         "--judge SPEC (hf:PATH, vllm:PATH, or openai:URL with --judge-model)")
    if config.ray:
        raise ValueError("judged suites run without --ray (the judge client is one per run)")


def build_judge(config: Any, rubric: str) -> JudgeReward:
    """The run's judge reward: ``config.judge`` (a spec or a policy object) behind a client."""
    from tir_envs.rollout.specs import build_policy
    from tir_envs.tokenizer import load_tokenizer

    judge = config.judge
    tokenizer = load_tokenizer(config.judge_tokenizer) if config.judge_tokenizer else None
    if isinstance(judge, str):
        judge = build_policy(judge, tokenizer=tokenizer, model=config.judge_model)
        tokenizer = tokenizer or getattr(judge, "tokenizer", None)
    tokenizer = tokenizer or getattr(judge, "tokenizer", None)
    if tokenizer is None:
        raise ValueError("the judge's tokenizer is unknown: pass --judge-tokenizer")
    client = JudgeClient(judge, tokenizer, renderer=config.judge_renderer,
                         name=config.judge if isinstance(config.judge, str) else None)
    return JudgeReward(client, RUBRICS[rubric]())


def judge_figures(metadata: dict[str, Any]) -> dict[str, Any]:
    """A sample record's judge fields (nothing for a sample no judge graded)."""
    record = metadata.get("judge")
    if not isinstance(record, dict):
        return {}
    return {"judge_tokens": int(record.get("prompt_tokens", 0))
            + int(record.get("completion_tokens", 0)),
            "judge_called": int(record.get("attempts", 0) > 0),
            "judge_cached": bool(record.get("cached", False)),
            "judge_failed": record.get("failure") is not None,
            "judge_error": record.get("error") is not None}


def judge_summary(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Judge cost over a suite's records: calls, tokens, cache hits, failures, errors."""
    judged = [r for r in records if "judge_tokens" in r]
    if not judged:
        return None
    return {"samples": len(judged), "calls": sum(r["judge_called"] for r in judged),
            "tokens": sum(r["judge_tokens"] for r in judged),
            "cache_hit_rate": sum(r["judge_cached"] for r in judged) / len(judged),
            "failures": sum(r["judge_failed"] for r in judged),
            "errors": sum(r["judge_error"] for r in judged)}
