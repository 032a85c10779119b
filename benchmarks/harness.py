"""Run benchmark suites against a policy: every sample is an ``EpisodeRunner`` episode.

``run(["math500"], "vllm:/models/x", k=8, out="runs/x")`` evaluates ``k`` samples of every item,
appends each finished sample to ``RUN_DIR/samples.jsonl`` and writes ``summary.json``,
``report.md`` and the plots (``benchmarks.report``).  Items run in file order; sample ``s`` of
item ``i`` gets the sampling seed ``seed + i*k + s`` (what ``collect(..., samples_per_task=k,
seed=seed)`` would give it over the full set), however often the run was interrupted.  A rerun
on the same folder skips every finished sample.

Policies are the rollout engine's (``tir_envs.rollout``) or a spec string parsed exactly as
``tir-envs rollout`` parses ``--policy`` (``tir_envs.rollout.specs``: ``hf:PATH``,
``vllm:PATH``, ``openai:URL``, ``scripted:FILE``; a bad one raises ``PolicySpecError``).  A
policy may also define ``async generate_job(job, prompt_ids, stop, sampling)``: it is then told
which item and sample it is generating for (the oracle and the adversaries of the tests use
it).  Each sample's seed and job are explicit arguments of its episode (``EpisodeJob``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from tir_envs.data.task import Task
from tir_envs.rollout.policy import Generation, SamplingParams
from tir_envs.validation import check_positive_int

from benchmarks.records import sample_record
from benchmarks.store import RunStore
from benchmarks.suites import Part, Suite, get_suite


@dataclass(frozen=True)
class Job:
    """One sample to run: which suite item, which sample of it, and its sampling seed."""

    suite: str
    part: Part
    item: int
    sample: int
    seed: int | None
    task: Task


class _JobPolicy:
    """The user's policy as one job's episode sees it: told the job when it asks
    (``generate_job``)."""

    def __init__(self, policy: Any, job: Job):
        self.policy, self.job = policy, job
        self._by_job = getattr(policy, "generate_job", None)

    async def generate(self, prompt_ids: Sequence[int], stop: Sequence[str],
                       sampling: SamplingParams) -> Generation:
        if self._by_job is not None:
            return await self._by_job(self.job, prompt_ids, stop, sampling)
        return await self.policy.generate(prompt_ids, stop, sampling)


_UNCAPPED = 1 << 30


def sample_seed(seed: int | None, item: int, sample: int, k: int) -> int | None:
    """The sampling seed of sample ``sample`` of item ``item`` (``None``: unseeded)."""
    return None if seed is None else seed + item * k + sample


def resolve_policy(policy: Any, tokenizer: Any = None, model: str | None = None,
                   api_key: str | None = None) -> tuple[Any, Any, str, bool]:
    """``(policy, tokenizer, name, built)``: a spec string goes through the policy spec parser
    (``PolicySpecError`` if it names no usable policy); a policy object is used as it is, with
    ``tokenizer`` (default: bundled Qwen2.5)."""
    if isinstance(policy, str):
        from tir_envs.rollout.specs import build_policy
        built, tok = build_policy(policy, tokenizer=tokenizer, model=model, api_key=api_key)
        return built, tok, policy, True
    if not any(callable(getattr(policy, m, None)) for m in ("generate", "generate_job")):
        raise TypeError("policy must be a spec string (hf:PATH, vllm:PATH, openai:URL, "
                        "scripted:FILE) or an object with async generate(prompt_ids, stop, "
                        f"sampling) (or generate_job); got {type(policy).__name__}")
    return policy, tokenizer, type(policy).__name__, False


def run(suites: str | Sequence[str], policy: Any, *, out: str | Path, k: int = 1,
        temperature: float = 1.0, top_p: float = 1.0, top_k: int = -1, seed: int | None = 0,
        max_tokens: int | None = None, use_tools: bool = True, protocol: str | None = None,
        limit: int | None = None, tokenizer: Any = None, model: str | None = None,
        api_key: str | None = None, env_kwargs: Mapping[str, Any] | None = None,
        concurrency: int = 32, episode_timeout_s: float | None = None, progress: bool = True,
        report: bool = True) -> dict[str, Any]:
    """Evaluate ``policy`` on ``suites``; return the summary (also in ``out/summary.json``).

    Args:
      suites: a suite name or names (``benchmarks.SUITES``).
      policy: a policy object or a ``tir-envs rollout`` spec string (module docstring);
        ``tokenizer``/``model``/``api_key`` as that command's flags.
      out: the run folder; an existing one is resumed (same settings required).
      k: samples per item.  ``temperature``/``top_p``/``top_k``/``seed``: sampling
        (``seed=None`` leaves it unseeded); ``max_tokens``: a cap per turn below the env's own
        budget (default: none, the protocol's budget decides).
      use_tools: ``False`` runs the protocols' standalone ("w/o tools") prompt, no tool runs.
      protocol: the math protocol (``torl``, ``zerotir``, ``rite``) for math suites.
      limit: the first N items of each part (smoke runs); env_kwargs: extra env arguments.
      concurrency: episodes in flight; episode_timeout_s: wall-clock limit per episode.
    """
    names = [suites] if isinstance(suites, str) else list(suites)
    if not names:
        raise ValueError("suites is empty: name at least one suite")
    chosen = [get_suite(n) for n in names]
    check_positive_int(k=k, hint="samples per item")
    check_positive_int(limit=limit, allow_none=True)
    policy_obj, tok, name, built = resolve_policy(policy, tokenizer, model, api_key)
    # no cap of our own by default: the engine caps each turn at the env's info["max_new_tokens"]
    # (the protocol's budget), so every suite runs with its paper's length limits
    sampling = SamplingParams(max_tokens=max_tokens or _UNCAPPED, temperature=temperature,
                              top_p=top_p, top_k=top_k)
    config = {"suites": names, "policy": name if isinstance(policy, str) else None,
              "policy_name": name, "k": k, "temperature": temperature, "top_p": top_p,
              "top_k": top_k, "seed": seed, "max_tokens": max_tokens, "use_tools": use_tools,
              "protocol": protocol, "limit": limit,
              "env_kwargs": {key: repr(v) for key, v in sorted((env_kwargs or {}).items())},
              "concurrency": concurrency, "episode_timeout_s": episode_timeout_s}
    store = RunStore(out, config)
    try:
        for suite in chosen:
            kwargs = suite.make_kwargs(use_tools, protocol, env_kwargs)
            if tok is not None:
                kwargs.setdefault("tokenizer", tok)
            _run_suite(store, suite, policy_obj, kwargs, sampling, k, seed, limit, concurrency,
                       episode_timeout_s, progress)
    finally:
        if built and callable(getattr(policy_obj, "close", None)):
            policy_obj.close()
    if not report:
        return {}
    from benchmarks.report import write_outputs
    return write_outputs(out)


def plan(suite: Suite, k: int, seed: int | None, limit: int | None,
         finished: set[tuple[int, int]]) -> tuple[list[Job], int]:
    """The jobs still to run, in item then sample order, and how many are already done."""
    jobs, done = [], 0
    for item, (part, task) in enumerate(suite.items(limit)):
        for sample in range(k):
            if (item, sample) in finished:
                done += 1
                continue
            jobs.append(Job(suite.name, part, item, sample, sample_seed(seed, item, sample, k),
                            task))
    return jobs, done


def _run_suite(store: RunStore, suite: Suite, policy: Any, env_kwargs: dict[str, Any],
               sampling: SamplingParams, k: int, seed: int | None, limit: int | None,
               concurrency: int, episode_timeout_s: float | None, progress: bool) -> None:
    jobs, done = plan(suite, k, seed, limit, store.finished(suite.name))
    if not jobs:
        return
    # the env's own task list is the suite's (never its default set, e.g. a training mix)
    env_kwargs = {**env_kwargs, "tasks": list({id(j.task): j.task for j in jobs}.values())}
    bar = _LiveBar(suite.name, total=done + len(jobs), done=store.suite_records(suite.name),
                   enabled=progress)
    sink = store.open_for_append()
    failures: list[str] = []
    by_key = {(j.item, j.sample): j for j in jobs}

    def on_trajectory(traj) -> None:
        job = by_key[traj.metadata["item"], traj.metadata["sample"]]
        record = sample_record(suite.name, job.part.name, job.item, job.sample, job.seed,
                               job.task, traj)
        store.add(sink, record)
        bar.update(record)
        if record["infra_failed"]:
            failures.append(traj.failure.message if traj.failure else traj.stop_reason)

    try:
        asyncio.run(_episodes(suite, policy, jobs, env_kwargs, sampling, concurrency,
                              episode_timeout_s, on_trajectory))
    finally:
        sink.close()
        bar.close()
    if failures and len(failures) == len(jobs):
        raise BenchmarkFailed(f"all {len(jobs)} samples of suite {suite.name!r} failed "
                              f"(first: {failures[0]}); fix the policy or env and rerun the "
                              "same command: failed samples are retried")


async def _episodes(suite: Suite, policy: Any, jobs: Sequence[Job], env_kwargs: dict[str, Any],
                    sampling: SamplingParams, concurrency: int,
                    episode_timeout_s: float | None, on_trajectory) -> None:
    """Every job as one runner episode: its task, its own seed, the policy told its job."""
    from tir_envs.rollout.engine import EpisodeJob, arun
    from tir_envs.rollout.runner import EpisodeRunner, check_vocab

    runner = EpisodeRunner(suite.env_id, env_kwargs=env_kwargs,
                           episode_timeout_s=episode_timeout_s)
    episodes = [EpisodeJob({"task": j.task}, sampling=dataclasses.replace(sampling, seed=j.seed),
                           tags={"item": j.item, "sample": j.sample}, policy=_JobPolicy(policy, j))
                for j in jobs]
    try:
        check_vocab(policy, runner.first_env)
        await arun(runner, None, episodes, max_concurrency=concurrency,
                   progress=False, on_trajectory=on_trajectory, name=suite.name)
    finally:
        await runner.aclose()
        closer = getattr(policy, "aclose", None)  # what it bound to this loop (HTTP sessions)
        if closer is not None:
            await closer()


class BenchmarkFailed(RuntimeError):
    """Every sample a run attempted failed (policy or infrastructure), so no figure is real."""


class _LiveBar:
    """A tqdm bar over a suite's samples with the accuracy so far (resumed samples included)."""

    def __init__(self, name: str, total: int, done: list[dict[str, Any]], enabled: bool):
        from tqdm.auto import tqdm

        finished = [r for r in done if not r["infra_failed"]]
        self.n = len(finished)
        self.correct = sum(r["correct"] for r in finished)
        self.unanswered = sum(not r["answered"] for r in finished)
        self.calls = sum(r["tool_calls"] for r in finished)
        self.bar = tqdm(total=total, initial=self.n, desc=f"bench {name}", unit="sample",
                        disable=not enabled, dynamic_ncols=True)

    def update(self, record: dict[str, Any]) -> None:
        self.n += 1
        self.correct += record["correct"]
        self.unanswered += not record["answered"]
        self.calls += record["tool_calls"]
        self.bar.set_postfix({"acc": f"{self.correct / self.n:.3f}",
                              "no_ans": self.unanswered, "tools/ep": f"{self.calls / self.n:.2f}"},
                             refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()
