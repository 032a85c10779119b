"""Evaluation presets: each seed paper's own table, run as the paper ran it.

Each preset is a ``RunConfig`` value (``Preset.config``: the suites, samples per item, sampling,
protocol and call budget it fixes, ``preset`` set to its name).  ``tir-envs bench --preset
NAME`` (``tir_envs.bench.harness.run_preset(NAME, policy, out=...)``) runs it, with the settings a
preset leaves free (``preset_config``), and the report states the preset.
Where a paper does not say, the value is this library's reading (``docs/papers.md`` marks each).

| preset | suites | k | sampling | protocol, calls |
|---|---|---|---|---|
| ``torl`` | AIME24, AIME25, MATH-500, OlympiadBench, AMC23, Minerva | 1 | greedy | ToRL, C = 1 |
| ``zerotir`` | AIME24, AIME25, HMMT Feb 2025, MATH-500 | 32 | T 1.0, top-p 0.7 | ZeroTIR, 20 |
| ``verltool`` | as ToRL | 1 | T 0.6, top-p 0.95 | ToRL's format, 4 turns |
| ``rite`` | AIME24, AIME25, HMMT Feb 2025, MATH-500, TheoremQA | 16 | T 0.6, top-p 0.95 | RITE |
| ``autotir`` | AutoTIR's ten benchmarks | 1 | greedy | AutoTIR; IFEval as soft accuracy |

The report's table across benchmarks has the paper's rows alone: accuracy for the math papers,
accuracy, TS and TP for AutoTIR (``Preset.table``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from tir_envs.bench.config import RunConfig


@dataclass(frozen=True)
class Preset:
    """One paper's evaluation: ``config``, the ``RunConfig`` value of the settings it fixes
    (suites, k, sampling, protocol, env arguments such as the call budget; ``preset`` set to
    its name), and ``ifeval_metric``, the IFEval figure the paper's table reports
    (``"strict"``: prompt-level strict, this library's default; ``"soft"``: AutoTIR's share of
    instructions met); ``table``: the rows of the paper's table across its benchmarks, of
    ``acc`` (accuracy), ``ts`` (tool selection) and ``tp`` (tool productivity): only AutoTIR
    reports TS and TP, and on a math preset they would be rows the paper never had (TS is
    about choosing between tools; a math env has one)."""

    paper: str
    config: RunConfig
    ifeval_metric: str = "strict"
    table: tuple[str, ...] = ("acc",)

    @property
    def name(self) -> str:
        return str(self.config.preset)

    @property
    def suites(self) -> tuple[str, ...]:
        return tuple(self.config.suites)

    @property
    def env_kwargs(self) -> Mapping[str, Any]:
        return self.config.env_kwargs

    def run_settings(self) -> dict[str, Any]:
        """The ``RunConfig`` fields this preset fixes, besides its suites."""
        return {key: getattr(self.config, key) for key in FIXED if key != "suites"} | \
            {"env_kwargs": dict(self.config.env_kwargs)}


def _preset(name: str, paper: str, suites: tuple[str, ...], k: int, temperature: float,
            top_p: float, protocol: str | None = None,
            env_kwargs: Mapping[str, Any] | None = None, ifeval_metric: str = "strict",
            table: tuple[str, ...] = ("acc",)) -> Preset:
    config = RunConfig(suites=suites, k=k, temperature=temperature, top_p=top_p,
                       protocol=protocol, env_kwargs=dict(env_kwargs or {}), preset=name)
    return Preset(paper, config, ifeval_metric, table)


TORL_SUITES = ("aime24", "aime25", "math500", "olympiadbench", "amc23", "minerva_math")

PRESETS: dict[str, Preset] = {p.name: p for p in [
    _preset("torl", "ToRL (Li et al. 2025)", TORL_SUITES, 1, 0.0, 1.0, "torl"),
    _preset("zerotir", "ZeroTIR (Mai et al. 2025)",
            ("aime24", "aime25", "hmmt_feb2025", "math500"), 32, 1.0, 0.7, "zerotir"),
    _preset("verltool", "VerlTool (Jiang et al. 2025), math", TORL_SUITES, 1, 0.6, 0.95, "torl",
            {"max_turns": 4, "max_tool_calls": 4}),
    _preset("rite", "RITE (Chen, Yang et al. 2025)",
            ("aime24", "aime25", "hmmt_feb2025", "math500", "theoremqa"), 16, 0.6, 0.95, "rite"),
    _preset("autotir", "AutoTIR (Wei et al. 2025)", ("autotir",), 1, 0.0, 1.0,
            ifeval_metric="soft", table=("acc", "ts", "tp")),
]}

#: every row a table across benchmarks can have (a run without a preset shows them all)
TABLE_ROWS = ("acc", "ts", "tp")


def table_rows(preset: str | None) -> tuple[str, ...]:
    """The rows of a run's table across benchmarks: its preset's paper's, else all."""
    return PRESETS[preset].table if preset in PRESETS else TABLE_ROWS

#: the run settings a preset fixes; giving one of them as well is refused
FIXED = ("suites", "k", "temperature", "top_p", "protocol")


def get_preset(name: str) -> Preset:
    """The preset called ``name``, with an error listing the presets."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    return PRESETS[name]


def check_preset(name: str, suites: list[str], k: int, temperature: float | None,
                 top_p: float | None, protocol: str | None,
                 env_kwargs: Mapping[str, Any] | None) -> Preset:
    """The preset ``name``, after checking that a run's settings are the preset's (a report
    that names a preset ran exactly its table); extra env arguments (a retriever) are allowed."""
    preset = get_preset(name)
    given = {"suites": tuple(suites), "k": k, "temperature": temperature, "top_p": top_p,
             "protocol": protocol}
    wanted = {"suites": preset.suites, **{key: value for key, value in
                                          preset.run_settings().items() if key in FIXED}}
    differ = {key: (given[key], wanted[key]) for key in FIXED if given[key] != wanted[key]}
    kwargs = dict(env_kwargs or {})
    differ |= {f"env_kwargs.{key}": (kwargs.get(key), value)
               for key, value in preset.env_kwargs.items() if kwargs.get(key) != value}
    if differ:
        listed = "; ".join(f"{key} {got!r} (preset: {want!r})" for key, got, want in
                           ((key, *pair) for key, pair in differ.items()))
        raise ValueError(f"preset {name!r} fixes these settings, and the run gives others: "
                         f"{listed}. Drop them to run the paper's table, or drop the preset")
    return preset


def preset_config(name: str, policy: Any, *, out: Any, **settings: Any) -> RunConfig:
    """The ``RunConfig`` of the preset's suites and settings; ``settings``: the others
    (``limit``, ``tokenizer``, ``env_kwargs`` extras such as a retriever, ``concurrency``...).
    ``tir_envs.bench.harness.run_preset`` runs it."""
    preset = get_preset(name)
    fixed = [key for key in FIXED if key in settings]
    if fixed:
        raise ValueError(f"preset {name!r} fixes {', '.join(fixed)}; drop them")
    env_kwargs = {**dict(settings.pop("env_kwargs", None) or {}), **preset.env_kwargs}
    return preset.config.replace(policy=policy, out=out, env_kwargs=env_kwargs, **settings)
