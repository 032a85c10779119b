"""``RunConfig``: every setting of a benchmark run, in one frozen object.

``tir-envs bench`` fills it from its flags (``tir_envs.bench.cli``), ``tir_envs.bench.run`` takes it
(or builds it from keyword arguments: the same names), and the run folder's ``run.json`` stores
what of it decides the results (``RunConfig.record``), so a resumed run is checked against it.

Adding a setting: a field here (with its default), the flag in ``tir_envs.bench.cli`` (named as the
field, or mapped in ``cli.FLAG_FIELDS``), and its name in ``RECORDED`` if it changes what a run
measures (``run.json`` then refuses to resume a folder run with another value; a setting that
only changes how a run goes, e.g. ``concurrency``, goes in ``store._FREE`` too).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

#: fields stored in ``run.json`` as they are (the policy, env arguments and sampling are
#: stored by ``record`` in their own form)
RECORDED = ("k", "top_k", "seed", "max_tokens", "use_tools", "protocol", "limit",
            "concurrency", "episode_timeout_s")


@dataclass(frozen=True)
class RunConfig:
    """The settings of one benchmark run (``tir_envs.bench.harness.run`` documents each).

    ``suites``: names (``tir_envs.bench.SUITES``, or ``custom:FILE``); ``policy``: a policy object or
    a spec string; ``out``: the run folder.  Sampling: ``k``, ``temperature``, ``top_p``,
    ``top_k``, ``seed``, ``max_tokens``, ``seeds``.  The envs: ``use_tools``, ``protocol``,
    ``limit``, ``env_kwargs``; custom tasks: ``tasks``, ``env``, ``scoring``.  The policy's
    making: ``tokenizer``, ``model``, ``api_key``, ``engine_args``.  Execution: ``concurrency``,
    ``episode_timeout_s``, ``ray``, ``progress``, ``report``; ``by``: report breakdowns;
    ``preset``: the paper whose table the run is (``tir_envs.bench.presets``; ``run.json`` records
    it, with the preset's IFEval metric, when set); ``imports``: modules that register the
    user's own env ids (``--import``), imported before anything else, on Ray workers too.
    ``as_served``: give the policy each turn's conversation re-rendered by the family's chat
    template, as a server would (``tir_envs.chat.served``), and report the drift from the env's
    ledger (chat envs whose observations are messages only).  ``judge`` (a policy spec or
    object), ``judge_model``, ``judge_tokenizer``, ``judge_renderer``: the LLM judge of judged
    suites (``tir_envs.bench.judging``).
    """

    suites: tuple[str, ...] = ()
    policy: Any = None
    out: str | Path | None = None
    k: int = 1
    temperature: float | None = None
    top_p: float | None = None
    top_k: int = -1
    seed: int | None = 0
    max_tokens: int | None = None
    use_tools: bool = True
    protocol: str | None = None
    limit: int | None = None
    tokenizer: Any = None
    model: str | None = None
    api_key: str | None = None
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    concurrency: int = 32
    episode_timeout_s: float | None = None
    progress: bool = True
    report: bool = True
    engine_args: Mapping[str, Any] = field(default_factory=dict)
    seeds: int = 1
    by: Sequence[str] = ()
    tasks: str | Path | None = None
    env: str | None = None
    scoring: str | None = None
    ray: str | bool | None = None
    preset: str | None = None
    imports: Sequence[str] = ()
    as_served: bool = False
    #: an agent program run through the gateway per sample (``module:fn`` or the function)
    agent: Any = None
    judge: Any = None
    judge_model: str | None = None
    judge_tokenizer: Any = None
    judge_renderer: str | None = None

    def __post_init__(self) -> None:
        suites = self.suites
        names = (suites,) if isinstance(suites, str) else tuple(suites or ())
        object.__setattr__(self, "suites", names)
        object.__setattr__(self, "env_kwargs", dict(self.env_kwargs or {}))
        object.__setattr__(self, "engine_args", dict(self.engine_args or {}))
        object.__setattr__(self, "imports", tuple(self.imports or ()))
        if not isinstance(self.by, str):  # a string is refused, by name, when the run checks it
            object.__setattr__(self, "by", tuple(self.by or ()))

    def replace(self, **changes: Any) -> "RunConfig":
        """A copy with ``changes`` (the config itself never changes)."""
        return dataclasses.replace(self, **changes)

    @property
    def samples_per_item(self) -> int:
        """``k`` samples in each of ``seeds`` replicates."""
        return self.k * self.seeds

    @property
    def spec(self) -> str | None:
        """The policy's spec string (``None`` for a policy object)."""
        return self.policy if isinstance(self.policy, str) else None

    def sampling(self) -> tuple[float, float, str]:
        """``(temperature, top_p, note)``: the sampling the run uses (``sampling_defaults``) and
        how it was chosen, in words."""
        n = self.samples_per_item
        note = sampling_note(n, self.temperature, self.top_p)
        return (*sampling_defaults(n, self.temperature, self.top_p), note)

    def record(self, suites: Sequence[str], policy_pin: Any,
               custom: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """What ``run.json`` stores of this config: the settings that decide the results, with
        ``suites`` resolved to their names and the policy's content ``policy_pin``."""
        temperature, top_p, note = self.sampling()
        out = {"suites": list(suites), "policy": self.spec,
               "policy_name": self.spec or type(self.policy).__name__, "policy_pin": policy_pin,
               "temperature": temperature, "top_p": top_p, "sampling_note": note,
               "env_kwargs": {key: repr(v) for key, v in sorted(self.env_kwargs.items())},
               "by": list(self.by), **{name: getattr(self, name) for name in RECORDED}}
        if self.seeds > 1:  # absent for one seed, so folders of earlier versions resume
            out["seeds"] = self.seeds
        if self.imports:  # absent without --import, likewise; Ray workers import them
            out["imports"] = list(self.imports)
        if self.as_served:  # absent without --as-served, likewise; it changes what is measured
            out["as_served"] = True
        if self.agent is not None:  # absent without --agent, likewise
            from tir_envs.bench.agent_episodes import agent_name
            out["agent"] = agent_name(self.agent)
        if self.judge is not None:  # absent without a judge, likewise
            out["judge"] = self.judge if isinstance(self.judge, str) else \
                type(self.judge).__name__
            out["judge_model"] = self.judge_model
        if custom:  # the task files' pins: a changed file is refused on resume
            out["custom"] = dict(custom)
        return out


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
