"""Run configuration: nested dataclasses read from YAML/JSON, with ``a.b=value`` overrides.

Every field has a default, so a config file only states what differs.  Unknown keys are errors
that list the valid ones, so a typo never silently falls back to a default.  ``"???"`` marks a
value the user must set (the recipes' model and data paths): loading checks the values
(``validate``) unless asked not to, so an incomplete config can still be printed.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

#: the bundled configs, loadable by name (``GRPOConfig.load("toy")``)
CONFIG_DIR = Path(__file__).parent / "configs"


@dataclass
class ModelConfig:
    path: str | None = None              # local folder or hub name (AutoModelForCausalLM)
    tokenizer: str | None = None         # None: the model's; "qwen2.5": bundled; "mod:fn"; path
    random_init: dict[str, Any] | None = None  # Qwen2Config fields: random weights (tests, perf)
    dtype: str = "auto"                  # auto (bf16 autocast on GPU, fp32 on CPU) | fp32 | bf16
    device: str = "auto"                 # auto | cpu | cuda | cuda:N
    gradient_checkpointing: bool = False
    seed: int = 0                        # for random_init


@dataclass
class EnvConfig:
    id: str = "tir/MathCode-v0"          # a registered id or "module:Class"
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class DataConfig:
    path: str | None = None              # JSONL/Parquet/HF dataset of tasks; None: the env's own
    loader: str | None = None            # "module:function" reading path into Tasks (None: plain
    loader_kwargs: dict[str, Any] = field(default_factory=dict)  # records via read_records)
    split: str = "train"
    limit: int | None = None             # use only the first N tasks
    shuffle: bool = True


@dataclass
class RolloutConfig:
    backend: str = "transformers"        # transformers (CPU/GPU, in place) | vllm (GPU)
    samples_per_task: int = 8            # G
    tasks_per_step: int = 16             # groups per optimizer batch (after filtering)
    max_tokens: int = 1024               # per generated action
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_concurrency: int = 256
    episode_timeout_s: float | None = None
    mode: str = "async"                  # async | sync (engine schedule)
    max_batch_size: int = 64             # transformers: requests per generate call
    # the episode's context budget (env max_total_tokens) by step, growing during training:
    # {0: 16384, 300: 24576} means 16k from step 0, 24k from step 300 (RITE); None: the env's
    context_schedule: dict[int, int] | None = None
    vllm: dict[str, Any] = field(default_factory=dict)  # AsyncEngineArgs (gpu_memory_utilization…)


@dataclass
class AlgorithmConfig:
    advantage: str = "grpo"              # grpo (std-normalised) | dr_grpo (centred only)
    aggregation: str = "token_mean"      # token_mean | seq_mean | token_sum_norm
    # token_sum_norm's constant divisor per trajectory (Dr. GRPO); None: the episode's token
    # budget, the env's max_total_tokens (the context schedule's value at the step)
    max_len: int | None = None
    clip_low: float = 0.2
    clip_high: float | None = None       # None: = clip_low; e.g. 0.28 for DAPO's clip-higher
    kl_coef: float = 0.0                 # > 0 loads a frozen reference model (k3 estimator)
    accuracy_band: Any = None            # None | zerotir | rite | nonzero_var | [low, high]
    pass_rate: str = "group"             # the band reads: group (this group) | running (RITE)
    correct_threshold: float = 1.0       # reward >= this counts as correct when no component
    token_weights: Any = None            # None | rite | {alpha, ..}: RITE's w_t per token
    mask_void: bool = False              # ZeroTIR: no tool call and no answer gets zero loss
    mask_infra: bool = True              # infra-failed episodes: zero loss
    max_refill_rounds: int = 4
    oversample: float = 1.0
    ppo_epochs: int = 1
    mini_batch_size: int | None = None   # trajectories per optimizer step (None: all)
    micro_batch_size: int = 8            # trajectories per forward/backward (grad accumulation)
    use_sampler_logprobs: bool = True    # ratios vs the sampler's logprobs when present


@dataclass
class OptimConfig:
    lr: float = 1e-6
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    grad_clip: float = 1.0
    warmup_steps: int = 0


@dataclass
class TrainConfig:
    steps: int = 100
    seed: int = 0
    output_dir: str = "runs/grpo"
    save_every: int = 50                 # 0: only at the end
    keep_last: int = 2
    resume: bool = True                  # continue from output_dir's latest checkpoint
    tensorboard: bool = True             # when tensorboard is installed
    wandb_project: str | None = None     # when wandb is installed
    progress: bool = False               # the rollout engine's tqdm bar
    dump_rollouts: bool = False          # every step's trajectories to rollouts/step_NNNNN.jsonl


@dataclass
class GRPOConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any], check: bool = True) -> "GRPOConfig":
        """Build from nested mappings; ``check=False`` skips ``validate`` (unknown keys and
        badly typed values are still errors)."""
        config = _build(cls, d, "")
        if check:
            validate(config)
        return config

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Sequence[str] = (),
             check: bool = True) -> "GRPOConfig":
        """A config from a YAML/JSON file or a bundled config's name (``"toy"``), or the
        defaults, with ``section.key=value`` overrides."""
        data = read_file(find_config(path)) if path else {}
        for item in overrides:
            apply_override(data, item)
        return cls.from_dict(data, check)


SECTIONS = {"model": ModelConfig, "env": EnvConfig, "data": DataConfig, "rollout": RolloutConfig,
            "algorithm": AlgorithmConfig, "optim": OptimConfig, "train": TrainConfig}


def bundled_configs() -> list[str]:
    return sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


def find_config(name: str | Path) -> Path:
    """A config file: ``name`` itself when it exists, else the bundled config of that name."""
    path = Path(name)
    if path.exists():
        return path
    bundled = CONFIG_DIR / f"{path.stem if path.suffix in ('.yaml', '.yml') else path}.yaml"
    if path.parent == Path(".") and bundled.is_file():
        return bundled
    raise FileNotFoundError(f"config {str(name)!r}: no such file, and no bundled config of that "
                            f"name (bundled: {', '.join(bundled_configs())})")


def read_file(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file {str(path)!r} does not exist")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"config {str(path)!r} is not valid JSON: {exc}") from None
    elif path.suffix in (".yaml", ".yml"):
        import yaml
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ValueError(f"config {str(path)!r} is not valid YAML: {exc}") from None
    else:
        raise ValueError(f"config {str(path)!r}: use a .yaml, .yml or .json file")
    if not isinstance(data, dict):
        raise ValueError(f"config {str(path)!r} must hold a mapping of sections")
    return data


def apply_override(data: dict[str, Any], item: str) -> None:
    """Apply ``a.b.c=value`` (value parsed as YAML: numbers, bools, null, lists) in place."""
    import yaml

    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"override {item!r} must look like section.key=value, e.g. "
                         "optim.lr=1e-6")
    parts = key.strip().split(".")
    node = data
    for p in parts[:-1]:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ValueError(f"override {item!r}: {p!r} is not a section")
    value = yaml.safe_load(raw) if raw.strip() else None
    node[parts[-1]] = value


def _build(cls: type, d: Any, where: str) -> Any:
    if not isinstance(d, dict):
        raise ValueError(f"config section {where or 'root'!r} must be a mapping, got {d!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - set(fields))
    if unknown:
        raise ValueError(f"unknown config key(s) {[where + k for k in unknown]}; valid keys in "
                         f"{where.rstrip('.') or 'the root'}: {sorted(fields)}")
    kwargs = {}
    for name, value in d.items():
        sub = _section_type(fields[name])
        if sub is not None:
            kwargs[name] = _build(sub, value or {}, f"{where}{name}.")
        elif name == "betas" and value is not None:
            kwargs[name] = tuple(float(v) for v in value)
        else:
            kwargs[name] = _coerce(value, str(fields[name].type), where + name)
    return cls(**kwargs)


def _coerce(value: Any, annotation: str, key: str) -> Any:
    """YAML reads ``1e-6`` as a string (it wants ``1.0e-6``): turn numeric strings into the
    field's number type, and name the key when a value cannot be one."""
    if not isinstance(value, str) or "str" in annotation:
        return value
    for kind, cast in (("float", float), ("int", int)):
        if kind in annotation:
            try:
                return cast(value)
            except ValueError:
                raise ValueError(f"config {key} must be a number, got {value!r}") from None
    return value


def _section_type(f: dataclasses.Field) -> type | None:
    """The dataclass of a root section (``model``, ``env``, ...); ``None`` for plain fields."""
    sub = SECTIONS.get(f.name)
    return sub if sub is not None and f.type in (sub, sub.__name__) else None


MISSING = "???"  # a value a config leaves to the user (the recipes' model and data paths)


def validate(c: GRPOConfig) -> None:
    """Reject values that would fail later (or silently do the wrong thing), naming the key."""
    from tir_envs.trainers.grpo.filtering import AccuracyBand
    from tir_envs.trainers.grpo.loss import AGGREGATIONS
    from tir_envs.trainers.grpo.token_weights import TokenWeights

    missing = _missing(c.to_dict(), "")
    if missing:
        raise ValueError(f"config value(s) {missing} must be set; pass them as overrides, e.g. "
                         f"{missing[0]}=/path/to/...")

    checks = [
        (c.rollout.backend in ("transformers", "vllm"), "rollout.backend",
         "transformers or vllm"),
        (c.rollout.mode in ("async", "sync"), "rollout.mode", "async or sync"),
        (c.rollout.samples_per_task >= 2, "rollout.samples_per_task",
         ">= 2 (group-relative advantages need at least two samples per task)"),
        (c.rollout.tasks_per_step >= 1, "rollout.tasks_per_step", ">= 1"),
        (c.rollout.max_tokens >= 1, "rollout.max_tokens", ">= 1"),
        (c.algorithm.advantage in ("grpo", "dr_grpo"), "algorithm.advantage", "grpo or dr_grpo"),
        (c.algorithm.aggregation in AGGREGATIONS, "algorithm.aggregation",
         " | ".join(AGGREGATIONS)),
        (c.algorithm.clip_low > 0, "algorithm.clip_low", "> 0"),
        (c.algorithm.clip_high is None or c.algorithm.clip_high > 0, "algorithm.clip_high",
         "> 0 or null"),
        (c.algorithm.kl_coef >= 0, "algorithm.kl_coef", ">= 0"),
        (c.algorithm.pass_rate in ("group", "running"), "algorithm.pass_rate",
         "group or running"),
        (c.algorithm.max_len is None or c.algorithm.max_len >= 1, "algorithm.max_len",
         ">= 1 or null"),
        (c.algorithm.ppo_epochs >= 1, "algorithm.ppo_epochs", ">= 1"),
        (c.algorithm.micro_batch_size >= 1, "algorithm.micro_batch_size", ">= 1"),
        (c.algorithm.mini_batch_size is None or c.algorithm.mini_batch_size >= 1,
         "algorithm.mini_batch_size", ">= 1 or null"),
        (c.model.dtype in ("auto", "fp32", "bf16"), "model.dtype", "auto, fp32 or bf16"),
        (c.model.path is not None or c.model.random_init is not None, "model.path",
         "a model folder/name, or set model.random_init for random weights"),
        (c.optim.lr > 0, "optim.lr", "> 0"),
        (c.train.steps >= 1, "train.steps", ">= 1"),
    ]
    for ok, key, want in checks:
        if not ok:
            raise ValueError(f"config {key} must be {want}; got {_get(c, key)!r}")
    AccuracyBand.parse(c.algorithm.accuracy_band, c.algorithm.correct_threshold)
    TokenWeights.parse(c.algorithm.token_weights)
    context_budget(c.rollout.context_schedule, 0)


def context_budget(schedule: Any, step: int) -> int | None:
    """The context budget at ``step`` from ``rollout.context_schedule`` (``None``: no schedule):
    the value of the last entry whose step is <= ``step``."""
    if schedule is None:
        return None
    pairs = schedule.items() if isinstance(schedule, dict) else schedule
    try:
        points = sorted((int(s), int(n)) for s, n in pairs)
    except (TypeError, ValueError):
        raise ValueError("rollout.context_schedule must map steps to token budgets, e.g. "
                         f"{{0: 16384, 300: 24576}}; got {schedule!r}") from None
    if not points or points[0][0] != 0 or any(n < 1 for _, n in points):
        raise ValueError("rollout.context_schedule must start at step 0 and give budgets >= 1, "
                         f"e.g. {{0: 16384, 300: 24576}}; got {schedule!r}")
    return [n for s, n in points if s <= step][-1]


def _missing(d: Any, where: str) -> list[str]:
    if isinstance(d, dict):
        return [k for name, v in d.items() for k in _missing(v, f"{where}{name}.")]
    return [where.rstrip(".")] if d == MISSING else []


def _get(c: GRPOConfig, key: str) -> Any:
    section, name = key.split(".")
    return getattr(getattr(c, section), name)
