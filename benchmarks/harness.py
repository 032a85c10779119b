"""Run benchmark suites against a policy: every sample is an ``EpisodeRunner`` episode.

``run(["math500"], "vllm:/models/x", k=8, out="runs/x")`` evaluates ``k`` samples of every item,
appends each finished sample to ``RUN_DIR/samples.jsonl`` and writes ``summary.json``,
``report.md`` and the plots (``tir_envs.bench.report``).  Items run in file order; sample ``s`` of
item ``i`` gets the sampling seed ``seed + i*n + s`` (n = k x seeds samples per item), however
often the run was interrupted.  A rerun on the same folder skips every finished sample.  The
folder is locked for one process (``tir_envs.bench.lock``); every setting is checked, and the
policy's content pinned (``tir_envs.bench.pins``), before anything is written or loaded.  The
settings are one ``RunConfig`` (``tir_envs.bench.config``), stored in ``run.json``; the episodes
run through one executor seam (``tir_envs.bench.execution``): in this process, or with ``ray=`` on
a Ray cluster's workers (``tir_envs.bench.ray_episodes``).

Policies are the rollout engine's (``tir_envs.rollout``) or a spec string parsed exactly as
``tir-envs rollout`` parses ``--policy`` (``tir_envs.rollout.specs``: ``hf:PATH``,
``vllm:PATH``, ``openai:URL``, ``scripted:FILE``; a bad one raises ``PolicySpecError``), or
``oracle``/``wrong`` (``tir_envs.bench.oracle``: every gold, a fixed wrong answer).  A
policy may also define ``async generate_job(job, prompt_ids, stop, sampling)``: it is then told
which item and sample it is generating for (the oracle and the adversaries of the tests use
it).  Each sample is a ``Job`` (``tir_envs.bench.jobs``), made once by the plan and carried
through its episode back to its record.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

from tir_envs.rollout.policy import SamplingParams
from tir_envs.validation import check_positive_int

from tir_envs.bench.config import RunConfig
from tir_envs.bench.execution import Episodes, executor
from tir_envs.bench.jobs import Job, plan
from tir_envs.bench.policies import check_policy, check_scripted_answers, resolve_policy
from tir_envs.bench.records import sample_record
from tir_envs.bench.store import RunStore
from tir_envs.bench.judging import build_judge, check_judge
from tir_envs.bench.suites import CUSTOM, Suite, custom_pin, custom_suite, get_suite, register

__all__ = ["BenchmarkFailed", "Job", "RunConfig", "RunInterrupted", "check_fields",
           "check_options", "run", "run_preset"]

_UNCAPPED = 1 << 30


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


def run(config: RunConfig | str | Sequence[str], policy: Any = None,
        **settings: Any) -> dict[str, Any]:
    """Evaluate a policy on suites; return the summary (also in ``out/summary.json``).

    ``config``: a ``RunConfig``, or the suites, with ``policy`` and the other settings as
    keywords (the ``RunConfig`` fields: ``run(["math500"], "oracle", out="runs/x", k=4)``).

    Args (the fields of ``RunConfig``):
      suites: a suite name or names (``tir_envs.bench.SUITES``).
      policy: a policy object or a spec string: ``oracle``, ``wrong`` or a ``tir-envs rollout``
        spec (module docstring); ``tokenizer``/``model``/``api_key`` as that command's flags,
        ``engine_args`` for ``vllm:`` (e.g. ``tensor_parallel_size``, ``max_model_len``,
        ``gpu_memory_utilization``).
      out: the run folder; an existing one is resumed (same settings and policy required);
        one process at a time (``tir_envs.bench.lock``).
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
      ray: run the episodes on a Ray cluster's workers (``tir_envs.bench.ray_episodes``): ``True``
        or ``"local"`` starts a local instance, an address (``auto``, ``ray://host:10001``)
        joins a cluster; the policy must be a spec string.  Records, resume and summary are
        those of a local run.
      preset: the paper whose table this run is (``tir_envs.bench.presets``); the settings must
        be the preset's (``run_preset`` fills them in).  The report states it.
      agent: an agent program (``module:fn`` or the function: ``async def agent(task,
        base_url, api_key)``) run through a gateway over the policy for every sample, graded
        by the suite env's reward on the policy's final answer (``tir_envs.bench.agent_episodes``).
      imports: modules to import first, each registering one's own env ids with
        ``gymnasium.register`` (``--import``; the working directory is on the path).

    Every setting, the data pins and the folder's settings are checked before anything is
    written or a model loads; a run interrupted by Ctrl-C raises ``RunInterrupted`` saying how
    many samples are saved.
    """
    if not isinstance(config, RunConfig):
        config = RunConfig(suites=config, policy=policy, **settings)
    elif policy is not None or settings:
        raise TypeError("run(config): pass a RunConfig alone, or the suites with policy= and the "
                        "settings as keywords")
    return _run(config)


def _warm_sandboxes(suites: list, env_kwargs: Any) -> None:
    """The sandbox pool of the suites' envs starts now, while the policy and tokenizer load
    (``tir_envs.envs.tooling.warm_sandbox``)."""
    from tir_envs.envs.tooling import warm_sandbox
    from tir_envs.registry import env_class

    for env_id in dict.fromkeys(suite.env_id for suite in suites):
        try:
            if warm_sandbox(env_class(env_id), dict(env_kwargs or {})):
                return  # one pool: the default local one
        except (ValueError, TypeError):
            continue  # bad settings: the env's own construction reports them


def run_preset(name: str, policy: Any, *, out: str | Path, **settings: Any) -> dict[str, Any]:
    """``run`` of a paper's preset (``tir_envs.bench.presets``): its suites and fixed settings;
    ``settings`` are the others (``limit``, ``tokenizer``, a retriever in ``env_kwargs``...)."""
    from tir_envs.bench.presets import preset_config

    return _run(preset_config(name, policy, out=out, **settings))


def _run(config: RunConfig) -> dict[str, Any]:
    from tir_envs.bench.lock import RunLock
    from tir_envs.bench.pins import policy_pin, search_index_pin
    from tir_envs.bench.store import check_settings

    if config.out is None:
        raise TypeError("run() needs out=: the run folder (an existing one is resumed)")
    if config.imports:
        from tir_envs.registry import import_modules
        import_modules(config.imports, "imports=")
    out = config.out
    chosen = _chosen_suites(config)
    custom = {suite.name: custom_pin(suite) for suite in chosen if suite.name.startswith(CUSTOM)}
    suite_kwargs = check_options(chosen, config.k, config.limit, config.protocol,
                                 config.use_tools, config.env_kwargs)
    check_positive_int(seeds=config.seeds, hint="independent replicates of the k samples")
    check_fields(chosen, config.by)
    check_policy(config.policy, config.model, config.engine_args)
    if config.agent is not None:
        from tir_envs.bench.agent_episodes import load_agent
        load_agent(config.agent)
        if config.ray or config.as_served:
            raise ValueError("agent= runs through the gateway in this process: drop ray= and "
                             "as_served= (the gateway always serves the model's template)")
    check_scripted_answers(config.policy, chosen, suite_kwargs, config.tokenizer)
    check_judge([suite.name for suite in chosen if suite.judge], config)
    if config.ray and config.spec is None:
        raise ValueError("a Ray run builds its policy on every worker: pass a spec string "
                         "(openai:URL,URL2, hf:PATH, vllm:PATH, scripted:FILE, oracle, wrong), "
                         f"not a {type(config.policy).__name__} object")
    temperature, top_p, _ = config.sampling()
    # no cap of our own by default: the engine caps each turn at the env's info["max_new_tokens"]
    # (the protocol's budget), so every suite runs with its paper's length limits
    sampling = SamplingParams(max_tokens=config.max_tokens or _UNCAPPED, temperature=temperature,
                              top_p=top_p, top_k=config.top_k)
    record = config.record([suite.name for suite in chosen], policy_pin(config.spec), custom)
    index = search_index_pin([suite.env_id for suite in chosen], config.env_kwargs)
    if index is not None:  # absent on the shipped index, so earlier folders resume
        record["search_index"] = index
    if config.preset is not None:  # absent without one, so folders of earlier versions resume
        from tir_envs.bench.presets import check_preset
        chosen_preset = check_preset(config.preset, record["suites"], config.k, temperature,
                                     top_p, config.protocol, config.env_kwargs)
        record["preset"] = config.preset
        record["ifeval_metric"] = chosen_preset.ifeval_metric
    with RunLock(out) as lock:  # another process on this folder: refused before anything else
        if lock.previous:
            warnings.warn(f"{out}: took over the lock of pid {lock.previous.get('pid')} on host "
                          f"{lock.previous.get('host')}, which died holding it; its finished "
                          "samples are kept", RuntimeWarning, stacklevel=3)
        check_settings(out, record)  # a changed setting: refused before any model loads
        for suite in chosen:
            if suite.name in custom:
                register(suite)  # item-scripted policies look their suite up by name
        policy_obj, tok, built = None, None, False
        if not config.ray:
            if config.use_tools:
                _warm_sandboxes(chosen, config.env_kwargs)
            policy_obj, tok, _, built = resolve_policy(config.policy, config.tokenizer,
                                                       config.model, config.api_key,
                                                       config.engine_args)
        for suite, kwargs in zip(chosen, suite_kwargs):
            if suite.judge:  # one judge for the run, built after every check
                kwargs["reward"] = build_judge(config, suite.judge)
        episodes = executor(config, policy_obj, record, tok)
        store = RunStore(out, record)
        try:
            for suite, kwargs in zip(chosen, suite_kwargs):
                if tok is not None:
                    kwargs.setdefault("tokenizer", tok)
                _run_suite(store, suite, episodes, kwargs, sampling, config)
        except KeyboardInterrupt as exc:
            total = sum(len(s.items(config.limit)) for s in chosen) * config.samples_per_item
            done = sum(len(store.finished(s.name)) for s in chosen)
            raise RunInterrupted(Path(out), done, total) from exc
        finally:
            if built and callable(getattr(policy_obj, "close", None)):
                policy_obj.close()
    if not config.report:
        return {}
    from tir_envs.bench.report import write_outputs
    return write_outputs(out)


def _chosen_suites(config: RunConfig) -> list[Suite]:
    """The run's suites (``tasks`` as the suite ``custom:FILE``), each checked to exist."""
    names = list(config.suites)
    if config.tasks is not None:
        names.append(f"{CUSTOM}{config.tasks}")
    if not names:
        raise ValueError("suites is empty: name at least one suite (or pass tasks=FILE)")
    if (config.env or config.scoring) and not any(n.startswith(CUSTOM) for n in names):
        raise ValueError("env= and scoring= apply to custom tasks (tasks=FILE); a shipped suite "
                         "has its own env and scoring")
    return [custom_suite(n[len(CUSTOM):], config.env, config.scoring) if n.startswith(CUSTOM)
            else get_suite(n) for n in names]


def check_fields(chosen: Sequence[Suite], by: Sequence[str]) -> None:
    """Every ``--by`` field must be a field some item of the run carries."""
    from tir_envs.bench.records import record_meta

    if isinstance(by, str):
        raise TypeError(f"by must be a list of task fields, got the string {by!r}")
    known = {key for suite in chosen for part in suite.parts for key in
             record_meta(part.tasks()[0].meta)}
    unknown = [f for f in by if f not in known]
    if unknown:
        raise ValueError(f"no item of {', '.join(s.name for s in chosen)} has the field(s) "
                         f"{unknown} to break results down by; fields: {', '.join(sorted(known))}")


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run; what is saved is kept and a rerun resumes."""

    def __init__(self, folder: Path, saved: int, total: int):
        super().__init__(f"interrupted: {saved} of {total} samples are saved in {folder}; "
                         "rerun the same command to resume")
        self.folder, self.saved, self.total = folder, saved, total


def _run_suite(store: RunStore, suite: Suite, episodes: Episodes, env_kwargs: dict[str, Any],
               sampling: SamplingParams, config: RunConfig) -> None:
    jobs, done = plan(suite, config.samples_per_item, config.seed, config.limit,
                      store.finished(suite.name))
    if not jobs:
        return
    # the env's own task list is the suite's (never its default set, e.g. a training mix)
    env_kwargs = {**env_kwargs, "tasks": list({id(j.task): j.task for j in jobs}.values())}
    bar = _LiveBar(suite.name, total=done + len(jobs), done=store.suite_records(suite.name),
                   enabled=config.progress)
    sink = store.open_for_append()
    failures: list[str] = []

    def on_sample(job: Job, traj) -> None:
        record = sample_record(suite.name, job.part.name, job.item, job.sample, job.seed,
                               job.task, traj)
        store.add(sink, record)
        bar.update(record)
        if record["infra_failed"]:
            failures.append(traj.failure.message if traj.failure else traj.stop_reason)

    try:
        episodes(suite, jobs, env_kwargs, sampling, on_sample)
    finally:
        sink.close()
        bar.close()
    if failures and len(failures) == len(jobs):
        raise BenchmarkFailed(f"all {len(jobs)} samples of suite {suite.name!r} failed "
                              f"(first: {failures[0]}); fix the policy or env and rerun the "
                              "same command: failed samples are retried")


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
