"""How a tool call ended, and what that makes of its turn: the status vocabulary, once.

``ToolStatus`` is what a tool reports for one call (host-observed: a tool's own text never
sets it); the ledger stores its value in each call's record (``turn.tool_results[i]["status"]``).
``TurnStatus`` is the turn's, derived from its calls' statuses by ``TurnStatus.of`` and from
nothing else: the worst of them, where a failure of the model's own call (``ERROR``, or
``KILLED`` for a resource limit) is ``TOOL_ERROR`` and a turn that ran nothing is
``NO_CALL``.  Counters (``RolloutStats``, the benchmark records, the trainers' logs) read both
through these enums, never through string spellings of their own.  Both are ``str`` enums:
a member equals its value (``TurnStatus.NO_CALL == "no_call"``), and JSON holds the value.
"""

from __future__ import annotations

import enum
from typing import Iterable


class _Word(str, enum.Enum):
    """A status that prints as its word (``ok``), as the JSON, reports and logs show it;
    Python 3.11's ``str`` of a str-mixed enum would print ``TurnStatus.OK``."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class ToolStatus(_Word):
    """How a tool call ended.  ``INFRA_ERROR`` is the tool's fault, never the model's."""

    OK = "ok"
    ERROR = "error"              # the model's call failed (exception, SQL error, bad args)
    TIMEOUT = "timeout"          # ran past its wall-clock limit and was stopped
    KILLED = "killed"            # stopped for a resource limit (memory, CPU, processes)
    INFRA_ERROR = "infra_error"  # sandbox died, retriever down: not a model error

    @property
    def failed(self) -> bool:
        """The call did not run to a normal end (any status but ``OK``)."""
        return self is not ToolStatus.OK


class TurnStatus(_Word):
    """How a turn's tool calls went, as a whole (``TurnStatus.of``)."""

    OK = "ok"
    TOOL_ERROR = "tool_error"    # some call failed by the model's doing (ERROR or KILLED)
    TIMEOUT = "timeout"          # some call ran past its limit
    INFRA_ERROR = "infra_error"  # some call failed for the host's reasons: drop, don't score
    NO_CALL = "no_call"          # the turn ran no call (final, over budget, or none written)

    @classmethod
    def of(cls, statuses: Iterable[ToolStatus]) -> "TurnStatus":
        """The turn's status from its calls': infrastructure first, then time-outs, then the
        model's own failures; ``NO_CALL`` when there were none."""
        seen = {ToolStatus(s) for s in statuses}
        if not seen:
            return cls.NO_CALL
        if ToolStatus.INFRA_ERROR in seen:
            return cls.INFRA_ERROR
        if ToolStatus.TIMEOUT in seen:
            return cls.TIMEOUT
        if seen & {ToolStatus.ERROR, ToolStatus.KILLED}:
            return cls.TOOL_ERROR
        return cls.OK
