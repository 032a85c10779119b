"""Env ids, registered with Gymnasium when ``tir_envs`` is imported.

``tir_envs.make`` is ``gymnasium.make`` with clear errors: an unknown id lists the valid ids,
and an unknown keyword lists the arguments the env accepts.  An id the user registered with
``gymnasium.register`` (``docs/write_an_env.md``) is as good as a shipped one: ``make``,
``collect``, the benchmark harness and the audit all accept it; ``import_modules`` imports the
modules that register such ids (the ``--import`` flag of the commands).
"""

from __future__ import annotations

import importlib
import inspect
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import gymnasium as gym

# Gymnasium is imported inside the functions: ``tir_envs.gym_hook`` calls ``register_all`` while
# Gymnasium itself is being imported, so this module must load without it.

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
    import gymnasium as gym

    for env_id, entry in ENV_SPECS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry, disable_env_checker=False)


def env_class(env_id: str) -> Any:
    """The class behind ``env_id`` (a shipped id, or one registered with ``gymnasium.register``;
    for the latter, the entry point, which may be a factory function), with a helpful error for
    unknown ids."""
    import gymnasium as gym

    if env_id in ENV_SPECS:
        entry: Any = ENV_SPECS[env_id]
    elif isinstance(env_id, str) and env_id in gym.registry:
        entry = gym.registry[env_id].entry_point
    else:
        raise gym.error.Error(f"unknown env id {env_id!r}; valid ids: {', '.join(known_ids())} "
                              "(your own env: gymnasium.register it, and pass --import MODULE "
                              "on the command line)")
    if isinstance(entry, str):
        if entry in ENV_SPECS.values():
            module, _, name = entry.partition(":")
            return getattr(importlib.import_module(module), name)
        from tir_envs.user_modules import resolve
        return resolve(entry, f"{env_id}'s entry point")
    return entry


def known_ids() -> list[str]:
    """The shipped ids, then the ids users registered whose entry point is a ``TIREnv``."""
    import gymnasium as gym

    from tir_envs.env import TIREnv

    own = []
    for env_id, spec in gym.registry.items():
        entry = spec.entry_point
        if env_id in ENV_SPECS or not (isinstance(entry, type) and issubclass(entry, TIREnv)):
            continue
        own.append(env_id)
    return sorted(ENV_SPECS) + sorted(own)


def is_env_id(env_id: Any) -> bool:
    """Whether ``env_id`` names a shipped or a Gymnasium-registered env."""
    import gymnasium as gym

    return isinstance(env_id, str) and (env_id in ENV_SPECS or env_id in gym.registry)


def import_modules(modules: list[str] | tuple[str, ...], flag: str = "--import") -> None:
    """Import the user's modules (each one registers its env ids) by the one lookup rule of
    ``tir_envs.user_modules`` (the working folder first).  ``flag``: what named the modules;
    a command-line flag (``--import``) makes a failure the command's one-line usage error
    (``SystemExit``), anything else an ``ImportError``."""
    from tir_envs.user_modules import UserModuleError, import_user_module

    for module in modules:
        try:
            import_user_module(module, flag)
        except UserModuleError as exc:
            if flag.startswith("--"):
                raise SystemExit(str(exc)) from None
            raise


def accepted_kwargs(cls: Any) -> set[str] | None:
    """Keyword arguments ``cls`` accepts, following ``**kwargs`` up to ``TIREnv``, with the
    keywords of the shipped tools it configures (``tir_envs.envs.tooling``); ``None`` when
    ``cls`` is a factory function taking ``**kwargs`` (nothing to check against)."""
    from tir_envs.envs.tooling import tool_keywords
    if not isinstance(cls, type):
        params = inspect.signature(cls).parameters.values()
        if any(p.kind == p.VAR_KEYWORD for p in params):
            return None
        return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
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
    import gymnasium as gym

    cls = env_class(env_id)
    gym_keys = {"max_episode_steps", "disable_env_checker", "autoreset", "apply_api_compatibility"}
    valid = accepted_kwargs(cls)
    unknown = [] if valid is None else sorted(set(kwargs) - valid - gym_keys)
    if unknown:
        raise TypeError(f"{env_id} got unknown argument(s) {unknown}; it accepts: "
                        f"{', '.join(sorted(valid))}")
    return gym.make(env_id, **kwargs)
