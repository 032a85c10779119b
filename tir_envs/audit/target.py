"""The env under audit: built from an id (or a factory), checked, and the tasks it is probed on.

Any env built on ``TIREnv`` can be audited: a shipped ``tir/*`` id, an id a user registered
with Gymnasium (``docs/write_an_env.md``), or a zero-argument factory.  Its protocol must say
how an answer and a call are written (``render_answer``/``render_call``): the probes are built
from them, not from per-env knowledge.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import gymnasium as gym

from tir_envs.audit.candidates import Candidates, candidates_for, goldless, tolerance_of
from tir_envs.env import TIREnv
from tir_envs.registry import make
from tir_envs.validation import check_positive_int

#: other tasks' golds read for wrong answers, at most
OTHER_GOLDS = 200


def build_env(env: str | Callable[[], gym.Env], protocol: str | None,
              env_kwargs: Mapping[str, Any] | None) -> TIREnv:
    """The unwrapped env, with a clear error for anything the audit cannot drive."""
    kwargs = dict(env_kwargs or {})
    if protocol is not None:
        if "protocol" in kwargs:
            raise ValueError("give the protocol once: --protocol or --env-arg protocol=...")
        kwargs["protocol"] = protocol
    if callable(env):
        if kwargs:
            raise ValueError("env_kwargs/protocol go with an env id; a factory builds its "
                             "env itself")
        built = env()
    elif not isinstance(env, str):
        raise TypeError(f"env must be an env id or a zero-argument factory, got "
                        f"{type(env).__name__}")
    else:
        built = make(env, **kwargs)  # a shipped id or one registered with gymnasium.register
    inner = built.unwrapped
    if not isinstance(inner, TIREnv):
        built.close()
        raise TypeError(f"{env!r} is a {type(inner).__name__}, not a tir_envs.TIREnv: the audit "
                        "drives envs through TIREnv's areset/astep over token ids")
    _check_protocol(inner)
    return inner


def _check_protocol(env: TIREnv) -> None:
    """The protocol writes an answer and a call of each tool, or the audit stops here."""
    try:
        env.protocol.render_answer("x")
        for tool in env.tools if env.use_tools else ():
            env.protocol.render_call(tool, "x")
    except (NotImplementedError, ValueError) as exc:
        env.close()
        raise TypeError(f"{type(env).__name__}: {exc}") from None


def pick_tasks(env: TIREnv, n: int) -> list[tuple[int, Candidates]]:
    """``n`` tasks with a gold answer, spread evenly over the env's task list (so a mixed set,
    e.g. AutoTIR's domains, is sampled across), each with its candidates.  An env none of
    whose tasks has a gold (``tir/OpenEnv-v0``: the reward is the remote's) gets ``n`` of its
    tasks with gold-free candidates (``has_gold``), for the probes that need no gold."""
    check_positive_int(tasks=n)
    graded = [i for i, t in enumerate(env.tasks) if t.answer is not None]
    if not graded:
        n = min(n, len(env.tasks))
        return [((k * len(env.tasks)) // n, goldless()) for k in range(n)]
    n = min(n, len(graded))
    chosen = [graded[(k * len(graded)) // n] for k in range(n)]
    others = [env.tasks[i].answer for i in graded[:OTHER_GOLDS]]
    tolerance = tolerance_of(getattr(env, "reward", None), env)
    return [(i, candidates_for(env.tasks[i].answer, others, tolerance)) for i in chosen]


def has_gold(chosen: list[tuple[int, Candidates]]) -> bool:
    """Whether the tasks ``pick_tasks`` chose have gold answers."""
    return any(c.gold for _, c in chosen)
