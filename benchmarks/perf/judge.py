"""Judge reward cost: calls per episode, cache hit rate, overhead per judged episode.

Prints JSON.  Real HotpotQA questions (the shipped dev sample) and the worst judge
(``GullibleJudge``, Qwen3's vocabulary and chat rendering) made to take ``judge_call_s`` per
call, as a served judge model would.  GRPO-like groups of ``group`` answers per question,
drawn from a few candidates each (the gold, a paraphrase, wrong ones), so answers repeat as
they do when a policy converges.

* ``baseline``: the bare judge call: ``policy.generate`` on a prebuilt prompt, one at a time.
* ``pointwise``: ``JudgeReward.score`` per episode from env-like threads (prompt building,
  rendering, the client's loop, parsing, the cache); ``overhead_ms`` is its time per judged
  (not cached) episode minus the bare call's, ``overhead_ratio`` the two times' ratio.
* ``grouped``: ``judge_groups`` (one call per group).
* ``calls_per_episode`` and ``cache_hit_rate`` for each mode.
``judge_call_s`` 0 measures the pure overhead of the machinery.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tir_envs.bench.perf.quick import pick  # noqa: E402

from tir_envs.chat.vocab import qwen3_tokenizer  # noqa: E402
from tir_envs.data.qa import load_qa  # noqa: E402
from tir_envs.judge import JudgeClient, JudgeReward, Rubric  # noqa: E402
from tir_envs.judge.gullible import GullibleJudge  # noqa: E402
from tir_envs.trajectory import Trajectory  # noqa: E402


def candidates(task) -> list[str]:
    gold = task.answer[0]
    return [gold, f"It is {gold}.", "I do not know", "Paris", "1974"]


def answers_for(tasks, group: int, seed: int = 0) -> list[list[str]]:
    rng = random.Random(seed)
    return [[rng.choice(candidates(t)) for _ in range(group)] for t in tasks]


def reward_for(tok, call_s: float, mode: str) -> JudgeReward:
    client = JudgeClient(GullibleJudge(tok, delay_s=call_s), tok, thinking="off",
                         max_concurrency=8)
    return JudgeReward(client, Rubric.equivalence(), mode=mode)


def baseline(tok, tasks, call_s: float, n: int) -> float:
    """Seconds per bare judge call (prompt prebuilt), one at a time."""
    reward = reward_for(tok, call_s, "pointwise")
    prompts = [reward.client.prompts.build(reward.rubric, t.question, t.answer[0],
                                           [candidates(t)[1]], "pointwise").ids for t in tasks]
    policy, sampling = reward.client.policy, reward.client.sampling

    async def run() -> float:
        t0 = time.perf_counter()
        for i in range(n):
            await policy.generate(prompts[i % len(prompts)], [], sampling)
        return (time.perf_counter() - t0) / n
    return asyncio.run(run())


def pointwise(tok, tasks, groups, call_s: float, threads: int) -> dict:
    reward = reward_for(tok, call_s, "pointwise")
    jobs = [(t, a) for t, g in zip(tasks, groups) for a in g]

    def one(job) -> float:
        t0 = time.perf_counter()
        reward.score(job[0], None, job[1])
        return time.perf_counter() - t0

    with ThreadPoolExecutor(threads) as pool:
        t0 = time.perf_counter()
        times = list(pool.map(one, jobs))
        wall = time.perf_counter() - t0
    s = reward.client.stats.to_dict()
    # a serial pass over the same episodes with a fresh cache: time per judged episode
    serial = reward_for(tok, call_s, "pointwise")
    t0 = time.perf_counter()
    for task in tasks:  # one answer per task, the one the baseline judges: none cached
        serial.score(task, None, candidates(task)[1])
    per_judged = (time.perf_counter() - t0) / len(tasks)
    return {"episodes": len(jobs), "calls": s["calls"],
            "calls_per_episode": s["calls"] / len(jobs), "cache_hit_rate": s["cache_hit_rate"],
            "seconds_per_judged_episode": per_judged, "wall_s": wall,
            "episodes_per_s": len(jobs) / wall, "median_episode_s": statistics.median(times),
            "judge_tokens_per_episode": s["tokens"] / len(jobs)}


def grouped(tok, tasks, groups, call_s: float) -> dict:
    reward = reward_for(tok, call_s, "scores")
    trajs = []
    for task, g in zip(tasks, groups):
        row = []
        for a in g:
            t = Trajectory(task_id=task.id)
            t.append([1], policy=True)
            t.metadata.update(reward.score(task, t, a).metadata)
            row.append(t)
        trajs.append(row)
    t0 = time.perf_counter()
    reward.judge_groups(trajs)
    wall = time.perf_counter() - t0
    s = reward.client.stats.to_dict()
    n = sum(len(g) for g in groups)
    return {"episodes": n, "calls": s["calls"], "calls_per_episode": s["calls"] / n,
            "cache_hit_rate": s["cache_hit_rate"], "wall_s": wall,
            "judge_tokens_per_episode": s["tokens"] / n}


def main() -> None:
    n_tasks, group = pick(64, 6), pick(8, 4)
    tok = qwen3_tokenizer()
    tasks = load_qa("hotpotqa", limit=n_tasks)
    groups = answers_for(tasks, group)
    out = {"machine": {"cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0]},
           "tasks": n_tasks, "group": group, "settings": []}
    for call_s in pick([0.0, 0.05], [0.0, 0.01]):
        base = baseline(tok, tasks, call_s, pick(64, 6))
        point = pointwise(tok, tasks, groups, call_s, threads=8)
        over = point["seconds_per_judged_episode"] - base
        out["settings"].append({
            "judge_call_s": call_s, "baseline_call_s": base, "pointwise": point,
            "grouped": grouped(tok, tasks, groups, call_s),
            "overhead_ms_per_judged_episode": 1000 * over,
            "overhead_ratio": point["seconds_per_judged_episode"] / base if base else None})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
