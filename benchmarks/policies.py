"""The policy of a benchmark run: a policy object, a ``tir-envs rollout`` spec string, or a
built-in sanity policy (``oracle``: every gold; ``wrong``: a fixed wrong answer)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

#: policies named by a bare word: sanity checks of a suite from the CLI
BUILTIN_POLICIES = ("oracle", "wrong")


def resolve_policy(policy: Any, tokenizer: Any = None, model: str | None = None,
                   api_key: str | None = None,
                   engine_args: Mapping[str, Any] | None = None) -> tuple[Any, Any, str, bool]:
    """``(policy, tokenizer, name, built)``: ``oracle``/``wrong`` are the item-scripted policies
    (``tir_envs.bench.oracle``: answers written by each env's own protocol); another spec string
    goes through the policy spec parser (``PolicySpecError`` if it names no usable policy); a
    policy object is used as it is, with ``tokenizer`` (default: bundled Qwen2.5)."""
    if policy in BUILTIN_POLICIES:
        from tir_envs.bench.oracle import adversary, oracle
        built = oracle(tokenizer) if policy == "oracle" else adversary("wrong", tokenizer)
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


def check_scripted_answers(policy: Any, suites: Sequence[Any],
                           suite_kwargs: Sequence[Mapping[str, Any]],
                           tokenizer: Any = None) -> None:
    """``oracle``/``wrong`` write each answer with the env's own protocol: an env whose protocol
    cannot (no ``render_answer``) is refused here, before the run folder is made.  Only custom
    suites are built to ask: every shipped suite's protocol writes answers (the oracle tests)."""
    if policy not in BUILTIN_POLICIES:
        return
    from tir_envs.registry import make

    from tir_envs.bench.oracle import check_answer_writer
    from tir_envs.bench.suites import CUSTOM

    for suite, kwargs in zip(suites, suite_kwargs):
        if not suite.name.startswith(CUSTOM):
            continue
        kw = {**kwargs, "tasks": [task for _, task in suite.items(1)]}
        if tokenizer is not None:
            kw.setdefault("tokenizer", tokenizer)
        env = make(suite.env_id, **kw)
        try:
            check_answer_writer(env.unwrapped.protocol, suite.env_id, policy)
        finally:
            env.close()
