"""Run benchmark suites against a policy: every sample is an ``EpisodeRunner`` episode.

``run(["math500"], "vllm:/models/x", k=8, out="runs/x")`` evaluates ``k`` samples of every item,
appends each finished sample to ``RUN_DIR/samples.jsonl`` and writes ``summary.json``,
``report.md`` and the plots (``benchmarks.report``).  Items run in file order; sample ``s`` of
item ``i`` gets the sampling seed ``seed + i*n + s`` (n = k x seeds samples per item), however
often the run was interrupted.  A rerun on the same folder skips every finished sample.  The
folder is locked for one process (``benchmarks.lock``); every setting is checked, and the
policy's content pinned (``benchmarks.pins``), before anything is written or loaded.  With
``ray=`` the episodes run on a Ray cluster's workers (``benchmarks.ray_episodes``).

Policies are the rollout engine's (``tir_envs.rollout``) or a spec string parsed exactly as
``tir-envs rollout`` parses ``--policy`` (``tir_envs.rollout.specs``: ``hf:PATH``,
``vllm:PATH``, ``openai:URL``, ``scripted:FILE``; a bad one raises ``PolicySpecError``), or
``oracle``/``wrong`` (``benchmarks.oracle``: every gold, a fixed wrong answer).  A
policy may also define ``async generate_job(job, prompt_ids, stop, sampling)``: it is then told
which item and sample it is generating for (the oracle and the adversaries of the tests use
it).  Each sample's seed and job are explicit arguments of its episode (``EpisodeJob``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from tir_envs.rollout.policy import Generation, SamplingParams
from tir_envs.task import Task
from tir_envs.validation import check_positive_int

from benchmarks.records import sample_record
from benchmarks.store import RunStore
from benchmarks.suites import (CUSTOM, Part, Suite, custom_pin, custom_suite, get_suite,
                               register)


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


#: policies named by a bare word: sanity checks of a suite from the CLI
BUILTIN_POLICIES = ("oracle", "wrong")


def resolve_policy(policy: Any, tokenizer: Any = None, model: str | None = None,
                   api_key: str | None = None, protocol: str | None = None,
                   engine_args: Mapping[str, Any] | None = None) -> tuple[Any, Any, str, bool]:
    """``(policy, tokenizer, name, built)``: ``oracle``/``wrong`` are the item-scripted policies
    (``benchmarks.oracle``); another spec string goes through the policy spec parser
    (``PolicySpecError`` if it names no usable policy); a policy object is used as it is, with
    ``tokenizer`` (default: bundled Qwen2.5)."""
    if policy in BUILTIN_POLICIES:
        from benchmarks.oracle import adversary, oracle
        built = oracle(protocol, tokenizer) if policy == "oracle" else \
            adversary("wrong", protocol, tokenizer)
        return built, tokenizer, policy, True
    if isinstance(policy, str):
        from tir_envs.rollout.specs import build_policy
        built, tok = build_policy(policy, tokenizer=tokenizer, model=model, api_key=api_key,
                                  engine_args=dict(engine_args or {}))
        return built, tok, policy, True
    check_policy(policy)
    return policy, tokenizer, type(policy).__name__, False


def check_policy(policy: Any, model: str | None = None,
                 engine_args: Mapping[str, Any] | None = None) -> None:
    """Whatever can be checked of ``policy`` without loading it (a spec's folder or file)."""
    if policy in BUILTIN_POLICIES:
        if engine_args:
            raise ValueError(f"engine arguments apply only to vllm:PATH, not {policy!r}")
        return
    if isinstance(policy, str):
        from tir_envs.rollout.specs import check_spec
        check_spec(policy, model=model, engine_args=dict(engine_args or {}))
        return
    if not any(callable(getattr(policy, m, None)) for m in ("generate", "generate_job")):
        raise TypeError("policy must be a spec string (hf:PATH, vllm:PATH, openai:URL, "
                        "scripted:FILE, oracle, wrong) or an object with async "
                        "generate(prompt_ids, stop, sampling) (or generate_job); got "
                        f"{type(policy).__name__}")


def check_options(chosen: Sequence[Suite], k: int, limit: int | None, protocol: str | None,
                  use_tools: bool, env_kwargs: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Every suite's env keyword arguments, after checking every setting: nothing is written,
    loaded or started before this passes."""
    from tir_envs.protocols import MATH_PROTOCOLS
    from tir_envs.registry import accepted_kwargs, env_class

    check_positive_int(k=k, hint="samples per item")
    check_positive_int(limit=limit, allow_none=True)
    if protocol is not None and protocol not in MATH_PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; the math protocols are "
                         f"{', '.join(sorted(MATH_PROTOCOLS))}")
    if env_kwargs and "tasks" in env_kwargs:
        raise ValueError("env argument 'tasks' would be ignored: a suite runs its own pinned "
                         "items; benchmark your own file with --tasks FILE (suite custom:FILE)")
    out = []
    for suite in chosen:
        kwargs = suite.make_kwargs(use_tools, protocol, env_kwargs)
        accepted = accepted_kwargs(env_class(suite.env_id))
        unknown = set() if accepted is None else set(kwargs) - accepted - {"tokenizer"}
        if unknown:
            raise ValueError(f"suite {suite.name!r} ({suite.env_id}) takes no env argument(s) "
                             f"{sorted(unknown)}; see help({env_class(suite.env_id).__name__})")
        suite.items(limit)  # the pinned data: its hashes and counts checked now
        out.append(kwargs)
    return out


def run(suites: str | Sequence[str], policy: Any, *, out: str | Path, k: int = 1,
        temperature: float | None = None, top_p: float | None = None, top_k: int = -1,
        seed: int | None = 0, max_tokens: int | None = None, use_tools: bool = True,
        protocol: str | None = None, limit: int | None = None, tokenizer: Any = None,
        model: str | None = None, api_key: str | None = None,
        env_kwargs: Mapping[str, Any] | None = None, concurrency: int = 32,
        episode_timeout_s: float | None = None, progress: bool = True, report: bool = True,
        engine_args: Mapping[str, Any] | None = None, seeds: int = 1,
        by: Sequence[str] = (), tasks: str | Path | None = None, env: str | None = None,
        scoring: str | None = None, ray: str | bool | None = None,
        preset: str | None = None) -> dict[str, Any]:
    """Evaluate ``policy`` on ``suites``; return the summary (also in ``out/summary.json``).

    Args:
      suites: a suite name or names (``benchmarks.SUITES``).
      policy: a policy object or a spec string: ``oracle``, ``wrong`` or a ``tir-envs rollout``
        spec (module docstring); ``tokenizer``/``model``/``api_key`` as that command's flags,
        ``engine_args`` for ``vllm:`` (e.g. ``tensor_parallel_size``, ``max_model_len``,
        ``gpu_memory_utilization``).
      out: the run folder; an existing one is resumed (same settings and policy required);
        one process at a time (``benchmarks.lock``).
      k: samples per item.  ``temperature``/``top_p``/``top_k``/``seed``: sampling
        (``seed=None`` leaves it unseeded; temperature/top-p default to the field's settings,
        ``sampling_defaults``); ``max_tokens``: a cap per turn below the env's own budget
        (default: none, the protocol's budget decides).
      use_tools: ``False`` runs the protocols' standalone ("w/o tools") prompt, no tool runs.
      protocol: the math protocol (``torl``, ``zerotir``, ``rite``) for math suites.
      limit: the first N items of each part (smoke runs); env_kwargs: extra env arguments.
      concurrency: episodes in flight; episode_timeout_s: wall-clock limit per episode.
      seeds: independent replicates of the k samples per item, each with its own seeds; the
        report gives the spread of avg@k, pass@k and maj@k over them.
      by: task fields to break every part's accuracy down by (MATH-500: level and subject
        always).
      tasks: one's own task file (JSONL/parquet) run as the suite ``custom:FILE``, pinned by its
        sha256 in ``run.json``; ``env`` (default ``tir/MathCode-v0``, any protocol) and
        ``scoring`` (default: the env's) apply to custom suites.
      ray: run the episodes on a Ray cluster's workers (``benchmarks.ray_episodes``): ``True``
        or ``"local"`` starts a local instance, an address (``auto``, ``ray://host:10001``)
        joins a cluster; the policy must be a spec string.  Records, resume and summary are
        those of a local run.
      preset: the paper whose table this run is (``benchmarks.presets``); the settings must
        be the preset's (``run_preset`` fills them in).  The report states it.

    Every setting, the data pins and the folder's settings are checked before anything is
    written or a model loads; a run interrupted by Ctrl-C raises ``RunInterrupted`` saying how
    many samples are saved.
    """
    from benchmarks.lock import RunLock
    from benchmarks.pins import policy_pin
    from benchmarks.store import check_settings

    names = [suites] if isinstance(suites, str) else list(suites or [])
    if tasks is not None:
        names.append(f"{CUSTOM}{tasks}")
    if not names:
        raise ValueError("suites is empty: name at least one suite (or pass tasks=FILE)")
    chosen = [custom_suite(n[len(CUSTOM):], env, scoring) if n.startswith(CUSTOM) else
              get_suite(n) for n in names]
    if (env or scoring) and not any(n.startswith(CUSTOM) for n in names):
        raise ValueError("env= and scoring= apply to custom tasks (tasks=FILE); a shipped suite "
                         "has its own env and scoring")
    names = [suite.name for suite in chosen]
    custom = {suite.name: custom_pin(suite) for suite in chosen if suite.name.startswith(CUSTOM)}
    suite_kwargs = check_options(chosen, k, limit, protocol, use_tools, env_kwargs)
    check_positive_int(seeds=seeds, hint="independent replicates of the k samples")
    check_fields(chosen, by)
    check_policy(policy, model, engine_args)
    if ray and not isinstance(policy, str):
        raise ValueError("a Ray run builds its policy on every worker: pass a spec string "
                         "(openai:URL,URL2, hf:PATH, vllm:PATH, scripted:FILE, oracle, wrong), "
                         f"not a {type(policy).__name__} object")
    note = sampling_note(k * seeds, temperature, top_p)
    temperature, top_p = sampling_defaults(k * seeds, temperature, top_p)
    # no cap of our own by default: the engine caps each turn at the env's info["max_new_tokens"]
    # (the protocol's budget), so every suite runs with its paper's length limits
    sampling = SamplingParams(max_tokens=max_tokens or _UNCAPPED, temperature=temperature,
                              top_p=top_p, top_k=top_k)
    spec = policy if isinstance(policy, str) else None
    config = {"suites": names, "policy": spec,
              "policy_name": spec or type(policy).__name__, "policy_pin": policy_pin(spec),
              "k": k, "temperature": temperature, "top_p": top_p,
              "top_k": top_k, "seed": seed, "max_tokens": max_tokens, "use_tools": use_tools,
              "protocol": protocol, "limit": limit,
              "env_kwargs": {key: repr(v) for key, v in sorted((env_kwargs or {}).items())},
              "concurrency": concurrency, "episode_timeout_s": episode_timeout_s,
              "sampling_note": note, "by": list(by)}
    if seeds > 1:  # absent for one seed, so folders of earlier versions resume
        config["seeds"] = seeds
    if preset is not None:  # absent without one, so folders of earlier versions resume
        from benchmarks.presets import check_preset
        chosen_preset = check_preset(preset, names, k, temperature, top_p, protocol, env_kwargs)
        config["preset"] = preset
        config["ifeval_metric"] = chosen_preset.ifeval_metric
    if custom:  # the task files' pins: a changed file is refused on resume
        config["custom"] = custom
    with RunLock(out) as lock:  # another process on this folder: refused before anything else
        if lock.previous:
            warnings.warn(f"{out}: took over the lock of pid {lock.previous.get('pid')} on host "
                          f"{lock.previous.get('host')}, which died holding it; its finished "
                          "samples are kept", RuntimeWarning, stacklevel=2)
        check_settings(out, config)  # a changed setting: refused before any model loads
        for suite in chosen:
            if suite.name in custom:
                register(suite)  # item-scripted policies look their suite up by name
        if ray:
            from benchmarks.ray_episodes import connect
            remote = _RayPlan(connect(None if ray is True else ray), config, limit,
                              {"spec": policy, "tokenizer": tokenizer, "model": model,
                               "api_key": api_key, "engine_args": dict(engine_args or {})})
            policy_obj, tok, built = None, None, False
        else:
            remote = None
            policy_obj, tok, _, built = resolve_policy(policy, tokenizer, model, api_key,
                                                       protocol, engine_args)
        store = RunStore(out, config)
        try:
            for suite, kwargs in zip(chosen, suite_kwargs):
                if tok is not None:
                    kwargs.setdefault("tokenizer", tok)
                _run_suite(store, suite, policy_obj, kwargs, sampling, k * seeds, seed, limit,
                           concurrency, episode_timeout_s, progress, remote)
        except KeyboardInterrupt as exc:
            total = sum(len(s.items(limit)) for s in chosen) * k * seeds
            done = sum(len(store.finished(s.name)) for s in chosen)
            raise RunInterrupted(Path(out), done, total) from exc
        finally:
            if built and callable(getattr(policy_obj, "close", None)):
                policy_obj.close()
    if not report:
        return {}
    from benchmarks.report import write_outputs
    return write_outputs(out)


def check_fields(chosen: Sequence[Suite], by: Sequence[str]) -> None:
    """Every ``--by`` field must be a field some item of the run carries."""
    from benchmarks.records import record_meta

    if isinstance(by, str):
        raise TypeError(f"by must be a list of task fields, got the string {by!r}")
    known = {key for suite in chosen for part in suite.parts for key in
             record_meta(part.tasks()[0].meta)}
    unknown = [f for f in by if f not in known]
    if unknown:
        raise ValueError(f"no item of {', '.join(s.name for s in chosen)} has the field(s) "
                         f"{unknown} to break results down by; fields: {', '.join(sorted(known))}")


def sampling_note(samples: int, temperature: float | None, top_p: float | None) -> str:
    """How the sampling settings were chosen, in words, for the report."""
    if temperature is not None and top_p is not None:
        return "as given"
    if samples == 1 and temperature in (None, 0):
        return "greedy: the default for one sample per item (pass@1-style evaluation)"
    return ("the default for several samples per item (pass@k): temperature 0.6, top-p 0.95, "
            "each sample seeded" if temperature is None else "top-p by default")


def sampling_defaults(samples: int, temperature: float | None,
                      top_p: float | None) -> tuple[float, float]:
    """Temperature and top-p as the field evaluates when not given: greedy for a pass@1-style
    run (one sample per item: Qwen2.5-Math, ToRL), and for pass@k (several samples, k or
    seeds) the sampling of DeepSeek-R1's evaluation (temperature 0.6, top-p 0.95), each
    sample with its own seed.  Given values are kept as they are."""
    if temperature is None:
        temperature = 0.0 if samples == 1 else 0.6
    if top_p is None:
        top_p = 1.0 if temperature == 0 else 0.95
    return float(temperature), float(top_p)


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run; what is saved is kept and a rerun resumes."""

    def __init__(self, folder: Path, saved: int, total: int):
        super().__init__(f"interrupted: {saved} of {total} samples are saved in {folder}; "
                         "rerun the same command to resume")
        self.folder, self.saved, self.total = folder, saved, total


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
               concurrency: int, episode_timeout_s: float | None, progress: bool,
               remote: "_RayPlan | None" = None) -> None:
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
        if remote is not None:
            remote(suite, jobs, env_kwargs, sampling, concurrency, on_trajectory)
        else:
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


@dataclass
class _RayPlan:
    """Where a Ray run's episodes go: the connected ``ray`` module and what every worker needs
    to rebuild the suite and the policy (``benchmarks.ray_episodes``)."""

    ray: Any
    config: dict[str, Any]
    limit: int | None
    policy: dict[str, Any]

    def __call__(self, suite: Suite, jobs: Sequence[Job], env_kwargs: dict[str, Any],
                 sampling: SamplingParams, concurrency: int, on_trajectory) -> None:
        from benchmarks.ray_episodes import run_on_ray
        run_on_ray(self.ray, suite.name, self.config, env_kwargs, self.policy, sampling,
                   self.limit, jobs, concurrency, on_trajectory)


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
        self._shown = 0.0

    def update(self, record: dict[str, Any]) -> None:
        """Count ``record``; the figures are formatted only when the bar redraws (tqdm's own
        interval): formatting them per sample cost more than writing the record."""
        self.n += 1
        self.correct += record["correct"]
        self.unanswered += not record["answered"]
        self.calls += record["tool_calls"]
        now = time.monotonic()
        if not self.bar.disable and now - self._shown >= 0.1:
            self._postfix()
            self._shown = now
        self.bar.update(1)

    def _postfix(self) -> None:
        if self.n:
            self.bar.set_postfix({"acc": f"{self.correct / self.n:.3f}",
                                  "no_ans": self.unanswered,
                                  "tools/ep": f"{self.calls / self.n:.2f}"}, refresh=False)

    def close(self) -> None:
        self._postfix()
        self.bar.close()
