"""Generation for every rank through the one ``vllm_client`` TRL makes, in rounds.

In ``vllm_mode="server"`` TRL (1.16) creates ``VLLMClient`` on the main process only, and calls
the rollout function on every rank.  TRL's own single-turn rollout (``VLLMGeneration.generate``)
gathers every rank's prompts to the main process (``gather_object``), generates there, and
broadcasts the completions back (``broadcast_object_list``), each rank taking its slice.

Multi-turn episodes need the same, many times per batch and with ranks out of step (one rank's
episodes run tools while another's wait for tokens).  So each rank drives *rounds* from the
rollout function's thread while its episodes run on the env's event loop: a round starts when
all of the rank's live episodes wait for a generation, or ``tick`` seconds after the last round;
every rank gathers what its episodes asked for (possibly nothing) and whether it is finished,
the main process generates all of it (one ``vllm_client.generate`` call per distinct sampling
setting), broadcasts the answers, and each rank hands its own back to its episodes.  Rounds end
when every rank is finished, so the collectives stay matched on every rank.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

Request = dict[str, Any]
Answer = tuple[list[int], list[float]]


@dataclass
class _Pending:
    request: Request
    resolve: Callable[[Any, BaseException | None], None]


class ServerRounds:
    """One rank's side of the rounds (see the module docstring).  ``accelerator``: TRL's;
    ``generate(requests) -> answers`` runs on the main process only (it holds the client)."""

    def __init__(self, accelerator: Any, generate: Callable[[list[Request]], list[Answer]],
                 tick: float = 0.05):
        self.accelerator, self.generate, self.tick = accelerator, generate, tick
        self._cond = threading.Condition()
        self._pending: list[_Pending] = []
        self._live = 0
        self.rounds = 0

    def ask(self, request: Request, resolve: Callable[[Any, BaseException | None], None]) -> None:
        """Queue one generation (called from the env's loop); ``resolve(answer, error)`` is
        called from the rounds' thread."""
        with self._cond:
            self._pending.append(_Pending(request, resolve))
            self._cond.notify()

    def episode_done(self) -> None:
        with self._cond:
            self._live -= 1
            self._cond.notify()

    def drive(self, episodes: int, start: Callable[[], concurrent.futures.Future]) -> Any:
        """Start this rank's ``episodes`` (``start()``: their future, each calling
        ``episode_done`` when it ends) and run rounds until every rank's are finished.
        Returns the episodes' result."""
        from accelerate.utils import broadcast_object_list, gather_object

        with self._cond:
            self._live += episodes  # before they start: one that ends at once cannot go below 0
        batch = start()
        while True:
            mine, done = self._take()
            everyone = gather_object([{"requests": [p.request for p in mine], "done": done}])
            answers: list[Any] = [None]
            if self.accelerator.is_main_process:
                answers = [self._answer_all([e["requests"] for e in everyone])]
            broadcast_object_list(answers, from_process=0)
            self.rounds += 1
            result = answers[0][self.accelerator.process_index]
            for i, pending in enumerate(mine):
                if isinstance(result, str):
                    pending.resolve(None, RuntimeError(result))
                else:
                    pending.resolve(result[i], None)
            if all(e["done"] for e in everyone):
                return batch.result()

    def _take(self) -> tuple[list[_Pending], bool]:
        """Wait for the round's trigger; take the queued requests and say whether this rank is
        finished (no live episode, nothing queued)."""
        deadline = time.monotonic() + self.tick
        with self._cond:
            while (self._live > 0 and len(self._pending) < self._live
                   and time.monotonic() < deadline):
                self._cond.wait(max(0.0, deadline - time.monotonic()))
            mine, self._pending = self._pending, []
            return mine, self._live <= 0 and not mine

    def _answer_all(self, per_rank: list[list[Request]]) -> list[Any]:
        """Every rank's answers (a rank's entry is an error text if generation failed)."""
        flat = [r for requests in per_rank for r in requests]
        try:
            answers = self.generate(flat) if flat else []
        except Exception as exc:  # every waiting episode fails flagged; no rank hangs
            text = f"generation on the main process failed: {type(exc).__name__}: {exc}"
            return [text] * len(per_rank)
        out, start = [], 0
        for requests in per_rank:
            out.append(answers[start:start + len(requests)])
            start += len(requests)
        return out
