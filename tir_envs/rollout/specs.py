"""Policy spec strings: ``hf:PATH``, ``vllm:PATH``, ``openai:URL``, ``scripted:FILE``.

One parser for ``tir-envs rollout --policy``, ``tir-envs bench --policy`` and
``tir_envs.bench.run(policy="...")``.  A spec that names no usable policy raises
``PolicySpecError`` (a ``ValueError``) saying what is wrong; the CLIs turn it into their
one-line usage error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

KINDS = ("hf", "vllm", "openai", "scripted")


class PolicySpecError(ValueError):
    """A policy spec string that names no usable policy."""

    def __init__(self, spec: str, problem: str):
        super().__init__(f"policy spec {spec!r}: {problem}")
        self.spec, self.problem = spec, problem


def check_spec(spec: str, *, model: str | None = None,
               engine_args: dict[str, Any] | None = None) -> tuple[str, str]:
    """``(kind, target)`` of a spec after every check that needs no loading (a missing folder
    or file, a missing model name, engine arguments for a backend without an engine), so a
    caller can refuse a bad spec before it writes or starts anything."""
    kind, sep, target = spec.partition(":")
    if not sep or not target:
        raise PolicySpecError(spec, "expected KIND:TARGET with KIND one of hf, vllm, openai, "
                                    "scripted (e.g. hf:/models/qwen, "
                                    "openai:http://127.0.0.1:8000/v1)")
    if kind not in KINDS:
        raise PolicySpecError(spec, f"unknown kind {kind!r}; use hf, vllm, openai or scripted")
    if kind in ("hf", "vllm") and not Path(target).is_dir():
        raise PolicySpecError(spec, f"{target!r} is not a local model folder")
    if kind == "openai" and not model:
        raise PolicySpecError(spec, "openai:URL needs --model / model= (the served model name)")
    if engine_args and kind != "vllm":
        raise PolicySpecError(spec, f"engine arguments ({', '.join(sorted(engine_args))}) "
                                    "apply only to vllm:PATH")
    if kind == "scripted":
        _actions(spec, target)
    return kind, target


def build_policy(spec: str, *, tokenizer: Any = None, model: str | None = None,
                 api_key: str | None = None,
                 engine_args: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """``(policy, tokenizer)`` from a ``KIND:TARGET`` spec.  ``tokenizer`` (a folder or a
    tokenizer) overrides the model folder's own (default for servers and scripts: the bundled
    Qwen2.5); ``model``/``api_key``: the served model name and bearer token (``openai``);
    ``engine_args``: ``vllm`` engine arguments (``tensor_parallel_size``, ``max_model_len``,
    ``gpu_memory_utilization``, ...)."""
    from tir_envs.tokenizer import load_tokenizer

    kind, target = check_spec(spec, model=model, engine_args=engine_args)
    tok = load_tokenizer(tokenizer or (target if kind in ("hf", "vllm") else None))
    if kind == "hf":
        from tir_envs.rollout.hf import HFPolicy
        # per-request generators: a seeded sample does not depend on what shares its batch
        return HFPolicy(target, tok, per_request_rng=True), tok
    if kind == "vllm":
        from tir_envs.rollout.vllm_backend import VLLMPolicy
        return VLLMPolicy(target, tok, **(engine_args or {})), tok
    if kind == "openai":
        from tir_envs.rollout.openai_compat import OpenAIPolicy
        return OpenAIPolicy(target, model, tok, api_key=api_key), tok
    from tir_envs.rollout.scripted import ScriptedPolicy
    return ScriptedPolicy(_actions(spec, target), tok), tok


def _actions(spec: str, path: str) -> list[str]:
    """The action strings of a ``scripted:FILE`` spec."""
    try:
        actions = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PolicySpecError(spec, f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise PolicySpecError(spec, f"{path}: not JSON ({exc.msg}, line {exc.lineno})") \
            from None
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        raise PolicySpecError(spec, f"{path}: expected a JSON list of action strings")
    return actions
