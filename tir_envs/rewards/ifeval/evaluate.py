"""Scoring a response against a prompt's instruction list: strict, loose, and the accuracies.

*Strict*: each instruction is checked on the response as written.  *Loose* (IFEval's upper
bound): an instruction counts as followed if any of eight variants passes — the response, and
the response without its first line, its last line, or both, each with and without ``*``
characters — which forgives a chatty preamble ("Sure, here is…"), a closing remark, and
markdown emphasis.  A blank response (or variant) follows nothing.

Four IFEval accuracies over a set: prompt-level strict / loose (share of prompts whose
instructions are all followed) and instruction-level strict / loose (share of all
instructions followed).  AutoTIR also reports a *soft* accuracy: per prompt, the share of its
instructions followed, averaged over prompts.  AutoTIR's reward IFScore is the prompt-level
strict verdict: 1 when every instruction is followed, else 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from tir_envs.data.ifeval.arguments import validate_kwargs
from tir_envs.rewards.ifeval.instructions import INSTRUCTIONS


def loose_variants(response: str) -> list[str]:
    """The eight responses loose scoring tries, in IFEval's order."""
    lines = response.split("\n")
    no_first = "\n".join(lines[1:]).strip()
    no_last = "\n".join(lines[:-1]).strip()
    no_both = "\n".join(lines[1:-1]).strip()
    return [response, response.replace("*", ""), no_first, no_last, no_both,
            no_first.replace("*", ""), no_last.replace("*", ""), no_both.replace("*", "")]


@dataclass(frozen=True)
class IFEvalVerdict:
    """One response against one prompt's instructions."""

    instruction_ids: tuple[str, ...]
    strict_inst: tuple[bool, ...]
    loose_inst: tuple[bool, ...]

    @property
    def strict_prompt(self) -> bool:
        return all(self.strict_inst)

    @property
    def loose_prompt(self) -> bool:
        return all(self.loose_inst)

    @property
    def soft(self) -> float:
        """Share of the instructions followed (strict): AutoTIR's soft accuracy."""
        return sum(self.strict_inst) / len(self.strict_inst)

    @property
    def soft_loose(self) -> float:
        return sum(self.loose_inst) / len(self.loose_inst)

    @property
    def ifscore(self) -> float:
        """AutoTIR's IFScore: 1.0 when every instruction is followed (strict), else 0.0."""
        return float(self.strict_prompt)


def score_response(response: str, instruction_ids: Sequence[str],
                   kwargs_list: Sequence[Mapping[str, Any] | None] | None = None
                   ) -> IFEvalVerdict:
    """Strict and loose verdicts of ``response`` on each instruction.

    ``kwargs_list`` holds one argument dict per instruction (IFEval's ``kwargs`` field);
    ``None`` means no instruction takes arguments.  Bad ids or arguments raise ``ValueError``
    before anything is checked.
    """
    if isinstance(instruction_ids, str) or not instruction_ids:
        raise ValueError("instruction_ids must be a non-empty list of IFEval instruction ids")
    kwargs_list = [{}] * len(instruction_ids) if kwargs_list is None else list(kwargs_list)
    if len(kwargs_list) != len(instruction_ids):
        raise ValueError(f"{len(instruction_ids)} instruction ids but {len(kwargs_list)} kwargs "
                         "dicts; give one dict (possibly empty) per instruction")
    args = [validate_kwargs(iid, kw) for iid, kw in zip(instruction_ids, kwargs_list)]
    others = [v for v in loose_variants(response)[1:] if v.strip()]  # [0] is the response
    strict, loose = [], []
    for iid, kw in zip(instruction_ids, args):
        check = INSTRUCTIONS[iid].check
        followed = bool(response.strip()) and check(response, **kw)
        strict.append(followed)
        loose.append(followed or any(check(v, **kw) for v in others))
    return IFEvalVerdict(tuple(instruction_ids), tuple(strict), tuple(loose))


@dataclass(frozen=True)
class IFEvalAccuracy:
    """The accuracies of a set of verdicts (fractions in [0, 1])."""

    prompt_strict: float
    inst_strict: float
    prompt_loose: float
    inst_loose: float
    soft: float
    soft_loose: float
    prompts: int
    instructions: int

    def as_dict(self) -> dict[str, float | int]:
        return dict(self.__dict__)


def aggregate(verdicts: Iterable[IFEvalVerdict]) -> IFEvalAccuracy:
    """IFEval's four accuracies and AutoTIR's soft accuracy over a set of verdicts."""
    verdicts = list(verdicts)
    if not verdicts:
        raise ValueError("no verdicts to aggregate")
    n = len(verdicts)
    strict = [ok for v in verdicts for ok in v.strict_inst]
    loose = [ok for v in verdicts for ok in v.loose_inst]
    return IFEvalAccuracy(
        prompt_strict=sum(v.strict_prompt for v in verdicts) / n,
        inst_strict=sum(strict) / len(strict),
        prompt_loose=sum(v.loose_prompt for v in verdicts) / n,
        inst_loose=sum(loose) / len(loose),
        soft=sum(v.soft for v in verdicts) / n,
        soft_loose=sum(v.soft_loose for v in verdicts) / n,
        prompts=n, instructions=len(strict))
