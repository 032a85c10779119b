"""Env ids, registered with Gymnasium when ``tir_envs`` is imported.

``tir_envs.make`` is ``gymnasium.make`` with clear errors: an unknown id lists the valid ids,
and an unknown keyword lists the arguments the env accepts.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import gymnasium as gym

# id -> "module:Class".  Entry points are imported lazily, at make time.
ENV_SPECS: dict[str, str] = {
    "tir/MathCode-v0": "tir_envs.envs.mathcode:MathCodeEnv",
    "tir/Search-v0": "tir_envs.envs.search:SearchEnv",
    "tir/SQL-v0": "tir_envs.envs.sql:SQLEnv",
    "tir/AutoTIR-v0": "tir_envs.envs.autotir:AutoTIREnv",
    "tir/ToolUse-v0": "tir_envs.envs.tool_use:ToolUseEnv",
    "tir/OpenEnv-v0": "tir_envs.envs.openenv:OpenEnvEnv",
}


def register_all() -> None:
    """Register every id with Gymnasium (idempotent)."""
    for env_id, entry in ENV_SPECS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry, disable_env_checker=False)


def env_class(env_id: str) -> type:
    """The class behind ``env_id``, with a helpful error for unknown ids."""
    if env_id not in ENV_SPECS:
        raise gym.error.Error(f"unknown env id {env_id!r}; valid ids: {', '.join(sorted(ENV_SPECS))}")
    module, _, name = ENV_SPECS[env_id].partition(":")
    return getattr(importlib.import_module(module), name)


def accepted_kwargs(cls: type) -> set[str]:
    """Keyword arguments ``cls`` accepts, following ``**kwargs`` up to ``TIREnv``, with the
    keywords of the shipped tools it configures (``tir_envs.envs.tooling``)."""
    from tir_envs.envs.tooling import tool_keywords
    names: set[str] = tool_keywords(getattr(cls, "configured_tools", ()))
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters.values()
        names |= {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        if not any(p.kind == p.VAR_KEYWORD for p in params):
            break
    return names - {"self"}


def make(env_id: str, **kwargs: Any) -> gym.Env:
    """Create a registered env through ``gymnasium.make``, validating id and keywords."""
    cls = env_class(env_id)
    gym_keys = {"max_episode_steps", "disable_env_checker", "autoreset", "apply_api_compatibility"}
    valid = accepted_kwargs(cls)
    unknown = sorted(set(kwargs) - valid - gym_keys)
    if unknown:
        raise TypeError(f"{env_id} got unknown argument(s) {unknown}; it accepts: "
                        f"{', '.join(sorted(valid))}")
    return gym.make(env_id, **kwargs)
