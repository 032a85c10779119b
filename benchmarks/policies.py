"""The policy of a benchmark run: a policy object, a ``tir-envs rollout`` spec string, or a
built-in sanity policy (``oracle``: every gold; ``wrong``: a fixed wrong answer)."""

from __future__ import annotations

from typing import Any, Mapping

#: policies named by a bare word: sanity checks of a suite from the CLI
BUILTIN_POLICIES = ("oracle", "wrong")


def resolve_policy(policy: Any, tokenizer: Any = None, model: str | None = None,
                   api_key: str | None = None, protocol: str | None = None,
                   engine_args: Mapping[str, Any] | None = None) -> tuple[Any, Any, str, bool]:
    """``(policy, tokenizer, name, built)``: ``oracle``/``wrong`` are the item-scripted policies
    (``benchmarks.oracle``); another spec string goes through the policy spec parser
    (``PolicySpecError`` if it names no usable policy); a policy object is used as it is, with
    ``tokenizer`` (default: bundled Qwen2.5)."""
    if policy in BUILTIN_POLICIES:
        from benchmarks.oracle import adversary, oracle
        built = oracle(protocol, tokenizer) if policy == "oracle" else \
            adversary("wrong", protocol, tokenizer)
        return built, tokenizer, policy, True
    if isinstance(policy, str):
        from tir_envs.rollout.specs import build_policy
        built, tok = build_policy(policy, tokenizer=tokenizer, model=model, api_key=api_key,
                                  engine_args=dict(engine_args or {}))
        return built, tok, policy, True
    check_policy(policy)
    return policy, tokenizer, type(policy).__name__, False


def check_policy(policy: Any, model: str | None = None,
                 engine_args: Mapping[str, Any] | None = None) -> None:
    """Whatever can be checked of ``policy`` without loading it (a spec's folder or file)."""
    if policy in BUILTIN_POLICIES:
        if engine_args:
            raise ValueError(f"engine arguments apply only to vllm:PATH, not {policy!r}")
        return
    if isinstance(policy, str):
        from tir_envs.rollout.specs import check_spec
        check_spec(policy, model=model, engine_args=dict(engine_args or {}))
        return
    if not any(callable(getattr(policy, m, None)) for m in ("generate", "generate_job")):
        raise TypeError("policy must be a spec string (hf:PATH, vllm:PATH, openai:URL, "
                        "scripted:FILE, oracle, wrong) or an object with async "
                        "generate(prompt_ids, stop, sampling) (or generate_job); got "
                        f"{type(policy).__name__}")
