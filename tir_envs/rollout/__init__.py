"""Rollout: policies and the async engine that drives many episodes.

``collect(env, policy, tasks, samples_per_task=G, ...)`` runs episodes and returns trajectories;
each episode runs through ``EpisodeRunner``, the one episode loop.
Backends: ``HFPolicy`` (transformers), ``VLLMPolicy`` (vLLM), ``OpenAIPolicy`` (an
OpenAI-compatible server), ``ScriptedPolicy`` (replays actions).  Names are imported lazily, so
``import tir_envs.rollout`` does not pull in torch, vLLM or aiohttp.
"""

from __future__ import annotations

import importlib
from typing import Any

from tir_envs.limits import GenerationLimits
from tir_envs.rollout.policy import Generation, Policy, PolicyError, SamplingParams

_LAZY = {
    "EpisodeFailure": "tir_envs.trajectory",
    "collect": "tir_envs.rollout.engine", "acollect": "tir_envs.rollout.engine",
    "Rollouts": "tir_envs.rollout.engine", "RolloutStats": "tir_envs.rollout.engine",
    "EpisodeJob": "tir_envs.rollout.engine", "arun": "tir_envs.rollout.engine",
    "EpisodeRunner": "tir_envs.rollout.runner", "RunnerEpisode": "tir_envs.rollout.runner",
    "Lockstep": "tir_envs.rollout.runner",
    "ScriptedPolicy": "tir_envs.rollout.scripted", "HFPolicy": "tir_envs.rollout.hf",
    "OpenAIPolicy": "tir_envs.rollout.openai_compat", "VLLMPolicy": "tir_envs.rollout.vllm_backend",
}

__all__ = ["Generation", "GenerationLimits", "EpisodeFailure", "Policy", "PolicyError",
           "SamplingParams", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tir_envs.rollout' has no attribute {name!r}")
