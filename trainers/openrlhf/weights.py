"""Which weights OpenRLHF's rollout engine sampled each action with.

OpenRLHF 0.11.2 keeps no weight version on its rollout side: the trainer's ``global_step``
never reaches the engine or the agent executor.  What does reach the engine (the
``RolloutRayActor`` our executor runs inside) is every weight sync: the trainer pushes each
parameter through ``update_weight`` (NCCL) or ``update_weight_cuda_ipc`` (colocated), both
``collective_rpc`` calls on the actor's vLLM engine, and flags the sync's last parameter with
``empty_cache=True`` (its last argument).  ``WeightSyncs`` wraps that engine and counts the
completed syncs: version 0 is the weights the engine loaded, version k the weights after k
syncs.  A run that starts at step 0 syncs once per training step, so the version is the
trainer's ``global_step`` whose weights sampled; a run resumed from step G syncs once at start,
so add G - 1 (the count restarts with the engine).

The engine's ``generate`` is an async stream of outputs; ``WeightSyncs`` notes the version at
the first and the last output of each call, into the ``Span`` the caller opened for it
(``observe``).  With ``--train.partial_rollout_enable`` the trainer pauses generation, syncs and
resumes under requests still in flight, so one action's tokens can come from two versions: the
span says so (``first`` < ``last``).
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from typing import Any, AsyncIterator, Iterator

#: the engine calls through which OpenRLHF 0.11.2 pushes one parameter
UPDATE_METHODS = ("update_weight", "update_weight_cuda_ipc")


@dataclass
class Span:
    """The versions that produced one generation's outputs (``None`` until an output came)."""

    first: int | None = None
    last: int | None = None

    def saw(self, version: int) -> None:
        if self.first is None:
            self.first = version
        self.last = version


_SPAN: contextvars.ContextVar[Span] = contextvars.ContextVar("tir_openrlhf_span")


class WeightSyncs:
    """OpenRLHF's vLLM engine (``RolloutRayActor.llm``), counting the weight syncs it receives
    and noting which version produced each generation (see the module docstring)."""

    def __init__(self, llm: Any):
        self._llm = llm
        self.version = 0

    @classmethod
    def watch(cls, rollout_actor: Any) -> "WeightSyncs | None":
        """The counter on ``rollout_actor``'s engine, installed on first use; ``None`` for an
        engine that is not OpenRLHF's rollout actor (it has no ``llm`` taking weight syncs)."""
        llm = getattr(rollout_actor, "llm", None)
        if isinstance(llm, cls):
            return llm
        if llm is None or not hasattr(llm, "collective_rpc"):
            return None
        rollout_actor.llm = counter = cls(llm)
        return counter

    async def collective_rpc(self, method: str, *args: Any, **kwargs: Any) -> Any:
        out = await self._llm.collective_rpc(method, *args, **kwargs)
        rpc_args = kwargs.get("args", args[1] if len(args) > 1 else ())
        if method in UPDATE_METHODS and rpc_args and rpc_args[-1] is True:
            self.version += 1  # the sync's last parameter landed: new weights from here on
        return out

    def generate(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        return self._noted(self._llm.generate(*args, **kwargs), _SPAN.get(None))

    async def _noted(self, stream: AsyncIterator[Any], span: Span | None) -> AsyncIterator[Any]:
        async for output in stream:
            if span is not None:
                span.saw(self.version)
            yield output

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llm, name)


@contextlib.contextmanager
def observe() -> Iterator[Span]:
    """Open a ``Span`` for the generation made inside the block (in this asyncio task)."""
    span = Span()
    token = _SPAN.set(span)
    try:
        yield span
    finally:
        _SPAN.reset(token)
