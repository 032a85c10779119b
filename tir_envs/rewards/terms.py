"""``RewardTerms``: an env's reward as one composed part, its terms and their weights.

Three terms, each optional:
  * ``outcome``: the env's ``reward=`` part (a ``Reward``), scored once when the episode ends
    on the protocol's one reading of the answer;
  * ``turn``: a per-turn term ``f(turn, results) -> RewardResult | None`` for a tool-calling
    turn, credited at that turn's last policy token (an OpenEnv env's own step rewards);
  * ``format``: the terms the protocol itself defines on the finished episode
    (``Protocol.extra_reward(state) -> (terms, metadata)``: RITE's interleaved-format score).

The value is the weighted sum (weights default to 1; a term weighted 0 is not computed, so its
components are not logged either); components are each term's own, unweighted, as a rubric
lists its criteria.  Every reward an env pays goes through here: there is one place it is
assembled, and the answer it grades is handed in, never read or rewritten by a term.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from tir_envs.rewards.base import Reward, RewardResult

TERMS = ("outcome", "turn", "format")

TurnTerm = Callable[[Any, list], "RewardResult | None"]
FormatTerm = Callable[[Any], "tuple[dict[str, float], dict[str, Any]]"]


class RewardTerms:
    """The env's reward: ``outcome`` + ``turn`` + ``format`` terms with ``weights``."""

    def __init__(self, outcome: Reward, turn: TurnTerm | None = None,
                 format: FormatTerm | None = None, weights: Mapping[str, float] | None = None):
        if not isinstance(outcome, Reward):
            raise TypeError(f"the reward terms' outcome is a tir_envs.rewards.Reward, got "
                            f"{type(outcome).__name__}")
        self.outcome, self.turn, self.format = outcome, turn, format
        self.weights = check_weights(weights)

    def score_turn(self, turn: Any, results: list) -> RewardResult | None:
        """The per-turn term of one tool-calling turn, weighted (``None``: no term)."""
        w = self.weights["turn"]
        r = self.turn(turn, results) if self.turn is not None and w else None
        if r is None:
            return None
        return RewardResult(w * r.value, dict(r.components), r.correct, r.answered,
                            dict(r.metadata), r.infra_failed)

    async def ascore(self, episode: Any) -> RewardResult:
        """The finished episode's reward: the outcome on the protocol's one answer
        (``episode.answer``), plus the protocol's format terms on ``episode.state``."""
        result = await self.outcome.ascore(episode.task, episode.trajectory, episode.answer)
        w_out, w_fmt = self.weights["outcome"], self.weights["format"]
        terms, meta = self.format(episode.state) if self.format is not None and w_fmt \
            else ({}, {})
        value = w_out * result.value + w_fmt * sum(terms.values())
        return RewardResult(value, {**result.components, **terms}, result.correct,
                            result.answered, {**result.metadata, **meta}, result.infra_failed)


def check_weights(weights: Mapping[str, float] | None) -> dict[str, float]:
    """``reward_weights`` checked: numbers by term name; the terms not given weigh 1."""
    given = dict(weights or {})
    unknown = sorted(set(given) - set(TERMS))
    if unknown:
        raise ValueError(f"reward_weights has unknown term(s) {unknown}; the terms are "
                         f"{list(TERMS)} (e.g. reward_weights={{'format': 0.5}})")
    for name, w in given.items():
        if isinstance(w, bool) or not isinstance(w, (int, float)):
            raise TypeError(f"reward_weights[{name!r}] must be a number, got {w!r}")
    return {name: float(given.get(name, 1.0)) for name in TERMS}
