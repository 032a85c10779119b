"""``GenerationLimits``: what a generator must obey for the next action, as the env says it.

The env returns one at ``reset`` and after every ``step`` (``info["limits"]``; the current one
is ``env.unwrapped.limits``), because the stop strings may change mid-episode (ZeroTIR stops
at a code block only while calls are left) and the token budget shrinks as the ledger grows.
For Gymnasium users the same values are mirrored into ``info["stop_sequences"]`` and
``info["max_new_tokens"]``; those mirrored keys are what a Gymnasium wrapper can change, so
``from_info`` obeys them when a wrapper did.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

#: the info keys a Gymnasium user reads (the mirror of ``GenerationLimits``)
INFO_KEYS = ("stop_sequences", "max_new_tokens")


@dataclass(frozen=True)
class GenerationLimits:
    """Stop strings (kept in the output), stop token ids (the model family's end-of-turn and
    end-of-call ids, kept in the output too) and the most tokens the next action may have."""

    stop: tuple[str, ...]
    max_new_tokens: int
    stop_token_ids: tuple[int, ...] = ()

    def info(self) -> dict[str, Any]:
        """The ``info`` entries of a reset or step: the typed value and its Gymnasium mirror."""
        return {"limits": self, "stop_sequences": list(self.stop),
                "max_new_tokens": self.max_new_tokens,
                "stop_token_ids": list(self.stop_token_ids)}

    def cap(self, max_tokens: int) -> int:
        """A generator's own ``max_tokens`` capped at the env's budget (at least 1)."""
        return max(1, min(max_tokens, self.max_new_tokens))

    @classmethod
    def from_info(cls, info: Mapping[str, Any]) -> "GenerationLimits":
        """The limits a reset/step ``info`` states.  The typed ``info["limits"]`` unless a
        wrapper changed the mirrored keys (then those: a wrapper's change is obeyed)."""
        if any(key not in info for key in INFO_KEYS):
            raise KeyError("the env's reset/step info lacks 'stop_sequences'/'max_new_tokens'; "
                           "tir_envs envs always return them: does a wrapper drop the info?")
        typed = info.get("limits")
        stop, budget = info["stop_sequences"], info["max_new_tokens"]
        ids = tuple(int(i) for i in info.get("stop_token_ids", typed.stop_token_ids
                                              if isinstance(typed, cls) else ()))
        if isinstance(typed, cls) and typed.max_new_tokens == budget \
                and typed.stop_token_ids == ids \
                and len(typed.stop) == len(stop) and all(a == b for a, b in zip(typed.stop, stop)):
            return typed
        return cls(tuple(stop), int(budget), ids)
