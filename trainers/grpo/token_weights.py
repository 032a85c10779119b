"""RITE's token-level loss weights: ``w_t = α·IS_t + (1 − α)·𝟙[RS_t]``.

The RITE paper ("Reinforcement Learning for Tool-Integrated Interleaved Thinking towards
Cross-Domain Generalization") weights each policy token's loss by an importance score IS_t
(high on tool invocations and on the tokens where thinking changes course) and a rejection
indicator RS_t (0 on stylistic or repetitive tokens), with α = 0.8.  The paper does not give
the exact scoring, so this module fixes one reading, written down in ``docs/grpo.md``:

* ``IS_t = 1`` on a token that overlaps a **tool invocation** (the text matched by one of
  ``tool_patterns``: a ``<tool_call>…</tool_call>`` block, a fenced code block, a ``<search>``
  or ``<sql>`` call…) or a **thinking transition** (``<think>``/``</think>`` tags and the
  transition words of ``transition_words``: "wait", "however", "alternatively"…); else 0.
* ``RS_t = 0`` (rejected) on a token that overlaps a **stylistic** match (``stylistic_patterns``:
  runs of punctuation, emoji, filler phrases) or that completes a **repeated** ``repeat_ngram``
  of the trajectory's policy tokens (an n-gram of token ids seen earlier in the same
  trajectory); else 1.

So with α = 0.8: a plain token weighs 0.2, an important one 1.0, a rejected plain one 0 and a
rejected important one 0.8.  Weights apply to policy tokens only (the loss mask still decides
which tokens train), and the loss divisor is unchanged, so they rescale tokens against each
other, not the loss as a whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from tir_envs.trajectory import Trajectory

TOOL_PATTERNS = (r"<tool_call>.*?(?:</tool_call>|$)", r"```(?:python|py|sql)?\n.*?(?:```|$)",
                 r"<(search|sql|code|python)>.*?(?:</\1>|$)")
TRANSITION_WORDS = ("wait", "however", "but", "alternatively", "hmm", "actually", "instead",
                    "let me check", "let me verify", "double-check", "on second thought")
STYLISTIC_PATTERNS = (r"([!?~*=_-])\1{2,}", r"[\U0001F300-\U0001FAFF\u2600-\u27BF]",
                      r"(?i)\b(great question|i hope this helps|feel free to ask)\b")


@dataclass(frozen=True)
class TokenWeights:
    """The weighting rule; ``weights(traj, tokenizer)`` gives one weight per episode token."""

    alpha: float = 0.8
    tool_patterns: Sequence[str] = TOOL_PATTERNS
    transition_words: Sequence[str] = TRANSITION_WORDS
    stylistic_patterns: Sequence[str] = STYLISTIC_PATTERNS
    repeat_ngram: int = 8          # 0: no repetition check
    _compiled: dict = field(default_factory=dict, compare=False, repr=False)

    KEYS = ("alpha", "tool_patterns", "transition_words", "stylistic_patterns", "repeat_ngram")

    def __post_init__(self) -> None:
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"algorithm.token_weights.alpha must be in [0, 1], got {self.alpha}")
        if self.repeat_ngram < 0:
            raise ValueError("algorithm.token_weights.repeat_ngram must be >= 0 (0: off), got "
                             f"{self.repeat_ngram}")
        words = "|".join(re.escape(w) for w in self.transition_words)
        important = [*self.tool_patterns, r"</?think>"] + ([rf"(?i)\b(?:{words})\b"]
                                                            if words else [])
        self._compiled["important"] = [_compile(p, "tool_patterns") for p in important]
        self._compiled["stylistic"] = [_compile(p, "stylistic_patterns")
                                       for p in self.stylistic_patterns]

    @classmethod
    def parse(cls, spec: Any) -> "TokenWeights | None":
        """``None`` (off), ``"rite"`` (the defaults above) or a mapping of the fields."""
        if spec is None or spec == "none":
            return None
        if spec == "rite":
            return cls()
        if isinstance(spec, dict):
            unknown = sorted(set(spec) - set(cls.KEYS))
            if unknown:
                raise ValueError(f"unknown algorithm.token_weights key(s) {unknown}; valid: "
                                 f"{list(cls.KEYS)}")
            return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in spec.items()})
        raise ValueError(f"algorithm.token_weights must be null, 'rite' or a mapping of "
                         f"{list(cls.KEYS)}; got {spec!r}")

    def flags(self, traj: Trajectory, tokenizer) -> tuple[np.ndarray, np.ndarray]:
        """Per episode token: ``(important, rejected)`` booleans (False off policy tokens)."""
        n = len(traj.token_ids)
        important, rejected = np.zeros(n, bool), np.zeros(n, bool)
        for start, end in _policy_runs(traj.loss_mask):
            ids = traj.token_ids[start:end]
            pieces = [tokenizer.decode([i]) for i in ids]
            offsets = np.cumsum([0] + [len(p) for p in pieces])
            text = "".join(pieces)
            important[start:end] = _overlaps(text, offsets, self._compiled["important"])
            rejected[start:end] = _overlaps(text, offsets, self._compiled["stylistic"])
        if self.repeat_ngram:
            rejected |= _repeated(traj.token_ids, traj.loss_mask, self.repeat_ngram)
        return important, rejected

    def weights(self, traj: Trajectory, tokenizer) -> np.ndarray:
        """``α·IS + (1 − α)·RS`` per episode token (float32; 0 off policy tokens)."""
        important, rejected = self.flags(traj, tokenizer)
        w = self.alpha * important + (1.0 - self.alpha) * ~rejected
        return np.where(np.asarray(traj.loss_mask, bool), w, 0.0).astype(np.float32)


def _compile(pattern: str, key: str) -> re.Pattern:
    try:
        return re.compile(pattern, re.DOTALL)
    except re.error as exc:
        raise ValueError(f"algorithm.token_weights.{key}: bad regex {pattern!r}: {exc}") from None


def _policy_runs(mask: Sequence[int]) -> list[tuple[int, int]]:
    """Maximal runs of policy tokens (one per action): patterns never span an observation."""
    runs, start = [], None
    for i, m in enumerate(list(mask) + [0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            runs.append((start, i))
            start = None
    return runs


def _overlaps(text: str, offsets: np.ndarray, patterns: Sequence[re.Pattern]) -> np.ndarray:
    """Tokens (character spans ``offsets[i]..offsets[i+1]``) that overlap any match."""
    hit = np.zeros(len(offsets) - 1, bool)
    for pattern in patterns:
        for m in pattern.finditer(text):
            if m.end() > m.start():
                hit |= (offsets[:-1] < m.end()) & (offsets[1:] > m.start())
    return hit


def _repeated(ids: Sequence[int], mask: Sequence[int], n: int) -> np.ndarray:
    """Policy tokens that end an n-gram of policy tokens already seen earlier in the episode."""
    out = np.zeros(len(ids), bool)
    policy = [i for i, m in enumerate(mask) if m]
    seen: set[tuple[int, ...]] = set()
    for k in range(n - 1, len(policy)):
        gram = tuple(ids[j] for j in policy[k - n + 1:k + 1])
        if gram in seen:
            out[policy[k]] = True
        seen.add(gram)
    return out
