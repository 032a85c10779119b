"""What a judge grades against: weighted criteria, a reference answer, or both.

A rubric is trusted text the env's author wrote; the answer it is applied to is not (see
``tir_envs.judge.prompt``).  ``fingerprint`` names the rubric in the judge cache's key,
so editing a criterion never serves a verdict given under the old wording.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Sequence


@dataclass(frozen=True)
class Criterion:
    """One thing the judge checks, with its weight in the score."""

    text: str
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError("a rubric criterion needs its text (what the judge checks)")
        if not self.weight > 0:
            raise ValueError(f"criterion {self.text!r}: weight must be > 0, got {self.weight}")


#: the instruction of a reference-only rubric (the judged HotpotQA variant's)
EQUIVALENCE = ("The answer says the same thing as the reference answer: the same entity, "
               "number, date or yes/no, in any wording, with nothing wrong added.")


@dataclass(frozen=True)
class Rubric:
    """Criteria (weighted) and whether the task's gold is shown as the reference answer.

    ``use_reference``: the task's ``answer`` is shown to the judge as the reference (never to
    the policy).  ``scale``: the verdict is an integer 0..scale per answer; the reward is
    ``verdict / scale``.  ``threshold``: a normalised score at or above it marks the episode
    ``correct`` (what accuracy metrics and the audit read).
    """

    criteria: tuple[Criterion, ...] = ()
    use_reference: bool = True
    scale: int = 10
    threshold: float = 0.7
    name: str = "rubric"

    def __post_init__(self) -> None:
        crit = tuple(c if isinstance(c, Criterion) else _criterion(c) for c in self.criteria)
        object.__setattr__(self, "criteria", crit)
        if not crit and not self.use_reference:
            raise ValueError("a rubric needs criteria, a reference answer (use_reference=True), "
                             "or both")
        if not isinstance(self.scale, int) or not 1 <= self.scale <= 100:
            raise ValueError(f"scale must be an integer in 1..100, got {self.scale!r}")
        if not 0 < self.threshold <= 1:
            raise ValueError(f"threshold must be in (0, 1], got {self.threshold}")

    @classmethod
    def equivalence(cls, **kwargs: Any) -> "Rubric":
        """Answer equivalence with the reference (judged open-domain QA)."""
        return cls((Criterion(EQUIVALENCE),), use_reference=True, name="equivalence", **kwargs)

    def lines(self) -> list[str]:
        """The criteria as the judge reads them, with each one's share of the score."""
        total = sum(c.weight for c in self.criteria) or 1.0
        return [f"- ({c.weight / total:.0%}) {c.text}" for c in self.criteria]

    def fingerprint(self) -> str:
        spec = {"criteria": [[c.text, c.weight] for c in self.criteria],
                "reference": self.use_reference, "scale": self.scale, "name": self.name}
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def _criterion(obj: Any) -> Criterion:
    if isinstance(obj, str):
        return Criterion(obj)
    if isinstance(obj, Sequence) and len(obj) == 2:
        return Criterion(str(obj[0]), float(obj[1]))
    if isinstance(obj, dict) and "text" in obj:
        return Criterion(str(obj["text"]), float(obj.get("weight", 1.0)))
    raise ValueError(f"a criterion is a string, (text, weight) or {{'text', 'weight'}}; got {obj!r}")


def reference_text(gold: Any) -> str | None:
    """The task's gold as the judge reads it (aliases joined); ``None`` without one."""
    if gold is None:
        return None
    if isinstance(gold, (list, tuple, set)):
        golds = [str(g) for g in gold]
        return golds[0] if len(golds) == 1 else " | ".join(golds) if golds else None
    return str(gold)
