"""How a tool call ended, and what that makes of its turn: the status vocabulary, once.

One enum, ``Status``, from the sandbox's wire to the ledger and every counter.  A tool call
ends ``OK``, ``ERROR``, ``TIMEOUT``, ``KILLED`` or ``INFRA_ERROR`` (``Status.CALL``); the host
observes it (a tool's own text never sets it) and the ledger stores its value in each call's
record (``turn.tool_results[i]["status"]``).  A turn's status is derived from its calls'
statuses by ``Status.of`` and from nothing else: the worst of them, where a failure of the
model's own call (``ERROR``, or ``KILLED`` for a resource limit) is ``TOOL_ERROR`` and a turn
that ran nothing is ``NO_CALL`` (``Status.TURN``).  Counters (``RolloutStats``, the benchmark
records, the trainers' logs) read statuses through this enum, never through string spellings
of their own.  A member equals its word (``Status.NO_CALL == "no_call"``), prints as it, and
JSON holds it.

``ToolStatus`` and ``TurnStatus`` are the names of earlier releases, kept for code that
imports them: they are this same enum.
"""

from __future__ import annotations

import enum
from typing import Iterable


class Status(str, enum.Enum):
    """How a tool call, or a turn's calls as a whole, ended.  ``INFRA_ERROR`` is the host's
    fault, never the model's."""

    OK = "ok"
    ERROR = "error"              # the model's call failed (exception, SQL error, bad args)
    TIMEOUT = "timeout"          # ran past its wall-clock limit and was stopped
    KILLED = "killed"            # stopped for a resource limit (memory, CPU, processes)
    INFRA_ERROR = "infra_error"  # sandbox died, retriever down: not a model error; drop
    TOOL_ERROR = "tool_error"    # a turn: some call failed by the model's doing
    NO_CALL = "no_call"          # a turn: it ran no call (final, over budget, none written)

    def __str__(self) -> str:  # Python 3.11 would print ``Status.OK`` for a str-mixed enum
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @property
    def failed(self) -> bool:
        """The call (or some call of the turn) did not run to a normal end."""
        return self not in (Status.OK, Status.NO_CALL)

    @classmethod
    def call(cls, word: "str | Status") -> "Status":
        """A tool call's status from its word; a turn-only word is refused (a call never
        ends ``no_call``), so a record cannot carry one where a call's belongs."""
        status = cls(word)
        if status not in CALL:
            raise ValueError(f"{status.value!r} is a turn's status, not a tool call's; "
                             f"a call ends one of {', '.join(s.value for s in CALL)}")
        return status

    @classmethod
    def of(cls, statuses: Iterable["str | Status"]) -> "Status":
        """The turn's status from its calls': infrastructure first, then time-outs, then the
        model's own failures; ``NO_CALL`` when there were none."""
        seen = {cls.call(s) for s in statuses}
        if not seen:
            return cls.NO_CALL
        if cls.INFRA_ERROR in seen:
            return cls.INFRA_ERROR
        if cls.TIMEOUT in seen:
            return cls.TIMEOUT
        if seen & {cls.ERROR, cls.KILLED}:
            return cls.TOOL_ERROR
        return cls.OK


CALL = frozenset({Status.OK, Status.ERROR, Status.TIMEOUT, Status.KILLED, Status.INFRA_ERROR})
TURN = frozenset({Status.OK, Status.TOOL_ERROR, Status.TIMEOUT, Status.INFRA_ERROR,
                  Status.NO_CALL})

ToolStatus = Status  # the earlier releases' names for the same enum
TurnStatus = Status
