"""Which env a trainer adapter serves, read from environment variables.

The trainers build the adapter themselves (OpenRLHF loads ``--train.agent_func_path`` by path
and calls ``AgentExecutor()`` with no arguments; verl instantiates the agent loop in its
workers), so the env may be configured outside the call, in one of two ways (not both):

* ``TIR_ENV_ID`` (e.g. ``tir/MathCode-v0``) and optionally ``TIR_ENV_KWARGS``, a JSON object of
  constructor arguments (``{"recipe": "zerotir", "tasks": "math500"}``);
* ``TIR_ENV_CONFIG``: the path of a small YAML file with ``env_id`` and ``env_kwargs``.

The Python sandbox's backend is an env argument too, with its options: ``{"backend": {"name":
"ray", "num_hosts": 8, "actor_options": {"resources": {"sandbox": 1}}}}`` runs every episode's
code on sandbox-host actors of the Ray cluster
(``tir_envs.tools.python.backends.ray_backend.RayBackend``), spread over ``num_hosts`` hosts
placed by ``actor_options``.

Ray passes a driver's environment variables to its actors only through the job's runtime env
(``ray job submit --runtime-env-json '{"env_vars": {...}}'``); docs/openrlhf.md shows it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

ENV_ID = "TIR_ENV_ID"
ENV_KWARGS = "TIR_ENV_KWARGS"
ENV_CONFIG = "TIR_ENV_CONFIG"
YAML_KEYS = ("env_id", "env_kwargs")
_PROBE = "Tool-integrated reasoning: print(1 + 2)\n```output\n3\n```<|im_end|>"


class ConfigError(ValueError):
    """The adapter's env configuration is missing or malformed (the message says how to fix)."""


@dataclass(frozen=True)
class EnvConfig:
    """A registered env id and the keyword arguments to make it with."""

    env_id: str
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from tir_envs import ENV_SPECS

        if self.env_id not in ENV_SPECS:
            raise ConfigError(f"unknown env id {self.env_id!r}; registered ids: "
                              f"{', '.join(sorted(ENV_SPECS))}")
        if not isinstance(self.env_kwargs, Mapping):
            raise ConfigError(f"env_kwargs must be a mapping of constructor arguments, got "
                              f"{type(self.env_kwargs).__name__}")
        backend = self.env_kwargs.get("backend")
        if isinstance(backend, Mapping) and not isinstance(backend.get("name"), str):
            raise ConfigError("env_kwargs.backend as a mapping needs the backend's 'name' next "
                              "to its options, e.g. {\"name\": \"ray\", \"num_hosts\": 4}; got "
                              f"{dict(backend)!r}")

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> "EnvConfig":
        """The configuration given by ``TIR_ENV_ID``/``TIR_ENV_KWARGS`` or ``TIR_ENV_CONFIG``."""
        environ = os.environ if environ is None else environ
        path, env_id = environ.get(ENV_CONFIG), environ.get(ENV_ID)
        if path and (env_id or environ.get(ENV_KWARGS)):
            raise ConfigError(f"set either {ENV_CONFIG} or {ENV_ID} (+ {ENV_KWARGS}), not both")
        if path:
            return cls.from_yaml(path)
        if not env_id:
            raise ConfigError(f"the trainer adapter needs the env to serve: set {ENV_ID} "
                              f"(e.g. tir/MathCode-v0) and optionally {ENV_KWARGS} (a JSON "
                              f"object), or {ENV_CONFIG} (a YAML file with env_id, env_kwargs)")
        raw = environ.get(ENV_KWARGS) or "{}"
        try:
            kwargs = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{ENV_KWARGS} is not valid JSON ({exc.msg} at column "
                              f"{exc.colno}): {raw[:200]!r}") from exc
        if not isinstance(kwargs, dict):
            raise ConfigError(f"{ENV_KWARGS} must be a JSON object, got {raw[:200]!r}")
        return cls(env_id, kwargs)

    @classmethod
    def from_yaml(cls, path: str | os.PathLike) -> "EnvConfig":
        import yaml

        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"{ENV_CONFIG}={str(path)!r}: no such file")
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if not isinstance(data, dict) or "env_id" not in data:
            raise ConfigError(f"{path}: expected a mapping with 'env_id' (and optionally "
                              "'env_kwargs')")
        unknown = sorted(set(data) - set(YAML_KEYS))
        if unknown:
            raise ConfigError(f"{path}: unknown key(s) {unknown}; allowed: {list(YAML_KEYS)}")
        return cls(data["env_id"], data.get("env_kwargs") or {})

    @classmethod
    def from_file(cls, path: str | os.PathLike, agent_name: str = "tir_agent") -> "EnvConfig":
        """The env a trainer's own config file serves: a ``TIR_ENV_CONFIG`` file (a mapping
        with ``env_id``, ``env_kwargs``) or a verl agent-loop file (a list of entries; the one
        named ``agent_name``).  The dataset writers read the same file the trainer does, so the
        rows' task ids come from the task set the trainer's env holds."""
        import yaml

        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"env config {str(path)!r}: no such file")
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(data, list):
            return cls.from_yaml(path)
        entries = [e for e in data if isinstance(e, dict) and e.get("name") == agent_name]
        if not entries:
            names = [e.get("name") for e in data if isinstance(e, dict)]
            raise ConfigError(f"{path}: no agent-loop entry named {agent_name!r} (entries: "
                              f"{names}); the adapters' rows route to {agent_name!r}")
        entry = entries[0]
        if "env_id" not in entry:
            raise ConfigError(f"{path}: entry {agent_name!r} names no env_id (it takes the env "
                              f"from {ENV_ID}/{ENV_KWARGS} at run time); give the writer the "
                              "same env with --env and --env-kwargs")
        return cls(entry["env_id"], entry.get("env_kwargs") or {})

    def make(self, tokenizer: Any = None):
        """A new env.  ``tokenizer`` (the policy's, as the trainer hands it to the adapter) is
        used unless the configuration names one."""
        from tir_envs.env_factory import env_factory

        return env_factory(self.env_id, self.env_kwargs, tokenizer)()


def check_same_tokenizer(core: Any, tokenizer: Any) -> None:
    """The env must count in the policy's ids: the adapters hand the trainer the env's ids."""
    from tir_envs.tokenizer import vocab_mismatch

    differs = vocab_mismatch(core.tokenizer, tokenizer)
    if differs is None and core.codec.encode(_PROBE) != \
            list(tokenizer(_PROBE, add_special_tokens=False)["input_ids"]):
        differs = "the same text encodes to other ids"
    if differs is not None:
        raise ValueError(
            f"{core.env_id} was made with a tokenizer other than the policy's "
            f"({len(core.tokenizer)} vs {len(tokenizer)} tokens: {differs}); drop 'tokenizer' "
            "from the env kwargs so the adapter uses the policy's, or point it at the policy's "
            "model folder")
