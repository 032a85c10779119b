"""The one way every runner makes envs: the rollout engine, the benchmark harness, the GRPO
trainer and the trainer adapters all call ``env_factory``.

An env is named by a registered id (``tir/MathCode-v0``, or a user's ``gymnasium.register``ed
id, checked by ``tir_envs.registry.make``), or given as a factory (a class or function making a
new env).  ``env_kwargs`` are its constructor arguments; ``tokenizer`` (the policy's, from a
trainer) is used unless ``env_kwargs`` names one, so policy and env count in the same ids.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import gymnasium as gym


def env_factory(env: Any, env_kwargs: Mapping[str, Any] | None = None,
                tokenizer: Any = None) -> Callable[[], gym.Env]:
    """A function making a fresh env each call (see the module docstring)."""
    kwargs = dict(env_kwargs or {})
    if tokenizer is not None:
        kwargs.setdefault("tokenizer", tokenizer)
    if isinstance(env, str):
        from tir_envs.registry import make
        return lambda: make(env, **kwargs)
    if isinstance(env, gym.Env):
        raise TypeError("env must be an env id, a factory returning a new env, or a list of env "
                        "instances (one per concurrent episode); a single instance cannot serve "
                        "concurrent episodes: pass e.g. lambda: MyEnv(...) or [env]")
    if callable(env):
        return (lambda: env(**kwargs)) if kwargs else env
    raise TypeError(f"env must be an env id such as 'tir/MathCode-v0', a factory, or a list of "
                    f"envs; got {type(env).__name__}")
