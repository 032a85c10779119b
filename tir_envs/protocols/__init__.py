"""Protocols by name: one module per paper setting (see ``tir_envs.protocols.base``)."""

from __future__ import annotations

from tir_envs.protocols.base import Budgets, EpisodeState, Protocol
from tir_envs.protocols.math import EXTRACTIONS, MathProtocol, OutcomeValues
from tir_envs.protocols.rite import RITEProtocol
from tir_envs.protocols.torl import ToRLProtocol
from tir_envs.protocols.zerotir import ZeroTIRProtocol

#: the math-code protocols of ``tir/MathCode-v0``, by name
MATH_PROTOCOLS: dict[str, type[MathProtocol]] = {
    "torl": ToRLProtocol, "zerotir": ZeroTIRProtocol, "rite": RITEProtocol}


def math_protocol(protocol: str | MathProtocol, stateful: bool = True,
                  extraction: str = "boxed") -> MathProtocol:
    """A math protocol instance from its name (or pass one through)."""
    if extraction not in EXTRACTIONS:
        raise ValueError(f"extraction must be one of {EXTRACTIONS}, got {extraction!r}")
    if isinstance(protocol, MathProtocol):
        return protocol
    if not isinstance(protocol, str):
        raise TypeError(f"protocol must be a name or a MathProtocol, got "
                        f"{type(protocol).__name__}")
    key = protocol.lower().replace("-", "").replace("_", "")
    if key not in MATH_PROTOCOLS:
        raise ValueError(f"unknown math protocol {protocol!r}; choose one of "
                         f"{sorted(MATH_PROTOCOLS)}")
    chosen = MATH_PROTOCOLS[key](stateful=stateful)
    chosen.extraction = extraction
    return chosen


__all__ = ["Budgets", "EpisodeState", "Protocol", "OutcomeValues", "MathProtocol",
           "MATH_PROTOCOLS", "math_protocol", "ToRLProtocol", "ZeroTIRProtocol", "RITEProtocol"]
