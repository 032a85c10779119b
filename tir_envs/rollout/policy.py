"""The policy contract: async token-in/token-out generation with stop strings.

Every backend (vLLM, transformers, an OpenAI-compatible server, a scripted replay) implements
``generate``.  Stop strings are kept in the returned tokens, so the env sees exactly what the
policy wrote, and ``logprobs`` are the sampler's log-probabilities of those tokens: under
``softmax(logits / temperature)``, top-p/top-k not folded in, what a trainer recomputes.

``prompt_ids`` is the whole context (prompt and episode so far).  A backend may also define
``async aclose()``, releasing what it bound to the running event loop (an HTTP session); the
policy must stay usable afterwards.  ``collect`` calls it when its loop ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence


@dataclass
class SamplingParams:
    """Sampling settings shared by every backend."""

    max_tokens: int = 512
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: ids that end the action, kept in it (the env's ``limits.stop_token_ids``: the model
    #: family's end-of-turn / end-of-call ids); every backend honours them
    stop_token_ids: tuple[int, ...] = ()


@dataclass
class Generation:
    """One generated action.

    ``finish_reason``: ``stop`` (a stop string or EOS), ``length`` (max_tokens), ``abort``.
    ``stop_reason``: the stop string that ended it, if any.  ``retokenized``: the backend
    could only return text, so ``token_ids`` come from encoding it (see ``drift``).
    ``policy_version``: the weights that sampled it, for off-policy corrections and staleness
    filters in asynchronous training.
    """

    token_ids: list[int]
    logprobs: list[float] | None = None
    finish_reason: str = "stop"
    stop_reason: str | None = None
    text: str | None = None
    retokenized: bool = False
    #: which weights sampled it (a trainer's step or weight-sync count), when the backend knows;
    #: else the policy's ``version`` attribute at the call is used (``EpisodeRunner``)
    policy_version: int | None = None


class PolicyError(RuntimeError):
    """The policy could not produce a generation: its server timed out, went away or answered
    nonsense.  Not the model's output and not a tool's fault: the rollout engine keeps the
    episode, flagged ``infra_failed`` with ``stop_reason="policy_error"`` and the cause."""


class Policy(Protocol):
    async def generate(self, prompt_ids: Sequence[int], stop: Sequence[str],
                       sampling: SamplingParams) -> Generation: ...
