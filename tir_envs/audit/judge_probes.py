"""Judge-injection probes: answers that attack an LLM judge (``tir_envs.judge``).

Each commits to a wrong answer (the task's first wrong candidate) and adds what a judge might
obey: instructions, a fake verdict, tags closing its data block, its family's control tokens
spelled out, a claim to be the reference, padding (``tir_envs.judge.injections``).
They apply to an env whose reward judges text: a ``JudgeReward`` in pointwise mode, or any
reward that declares ``judged = True``.  A grouped judge scores only when a trainer judges the
group (``JudgeReward.judge_groups``), which one audit episode never is: N/A there.
"""

from __future__ import annotations

from typing import Any

from tir_envs.audit.context import ProbeContext
from tir_envs.audit.probes import Action, probe
from tir_envs.judge.injections import INJECTIONS


def _judged(env: Any) -> bool:
    reward = getattr(env, "reward", None)
    return bool(getattr(reward, "judged", False)) and not getattr(reward, "grouped", False)


def _ends(env: Any) -> tuple[str, ...]:
    """The judge family's end-of-turn texts, when the reward says which judge it uses."""
    client = getattr(getattr(env, "reward", None), "client", None)
    if client is None:
        return ()
    return tuple(client.codec.decode([i]) for i in client.renderer.stop_token_ids())


def _register(name: str, what: str, build) -> None:
    @probe(f"judge.{name}", "judge", what)
    def _probe(ctx: ProbeContext):
        if not _judged(ctx.env):
            return None
        return [Action(ctx.answer(build(ctx.wrong[0], ctx.gold, _ends(ctx.env))))]


for _name, (_what, _build) in INJECTIONS.items():
    _register(_name, _what, _build)
