"""The outcome of running one cell, common to every backend, and how it reads to the model."""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Any

from tir_envs.tools.base import ToolResult, Status
from tir_envs.tools.python.sandbox.capture import truncate_text
from tir_envs.untrusted import escape_controls

LOST_STATE_NOTE = "The interpreter has been reset: variables from earlier calls are gone."
META_LINE_CHARS = 200     # the error's last line as kept in metadata (the text has it whole)
_ERROR_TYPE = re.compile(r"^([A-Za-z_][\w.]{0,99}):?")
_DETAIL_KEYS = ("cpu_s", "signal", "code", "isolation", "exit", "execution_count")


@dataclass
class Execution:
    """What a backend reports for one cell.

    ``error`` is the full trimmed traceback (or a one-line explanation when there is no Python
    exception, e.g. a timeout), ``error_last_line`` its last line.  ``lost_state`` says the
    interpreter is gone and the next call starts a fresh one.
    """

    status: Status
    stdout: str = ""
    stderr: str = ""
    value: str | None = None
    error: str | None = None
    error_last_line: str | None = None
    truncated: bool = False
    lost_state: bool = False
    duration_s: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def failure(cls, status: Status, message: str, *, lost_state: bool = False,
                stdout: str = "", stderr: str = "", **details: Any) -> "Execution":
        """An outcome without a Python traceback (timeout, kill, infrastructure)."""
        if lost_state:
            message = f"{message} {LOST_STATE_NOTE}"
        return cls(status, stdout=stdout, stderr=stderr, error=message,
                   error_last_line=message, lost_state=lost_state, details=dict(details))

    @classmethod
    def infra(cls, what: str, *, lost_state: bool = True, **details: Any) -> "Execution":
        """A failure of the sandbox itself, worded as every tool words one (``ToolResult.infra``).
        Only for what the host observed, never for anything a sandbox reported."""
        return cls.failure(Status.INFRA_ERROR, ToolResult.infra(what).text,
                           lost_state=lost_state, **details)

    def bounded(self, max_chars: int) -> "Execution":
        """This outcome with every string capped to ``max_chars`` (head and tail kept, the cut
        marked) and control characters escaped, whatever the backend returned: nothing from a
        sandbox is stored or encoded before this.  Wrong types become empty text."""
        cut = False

        def text(x: Any) -> str | None:
            nonlocal cut
            if x is None:
                return None
            t, dropped = truncate_text(x if isinstance(x, str) else "", max_chars)
            cut = cut or dropped > 0
            return escape_controls(t)

        duration = self.duration_s if isinstance(self.duration_s, (int, float)) else 0.0
        return dataclasses.replace(
            self, stdout=text(self.stdout) or "", stderr=text(self.stderr) or "",
            value=text(self.value), error=text(self.error),
            error_last_line=text(self.error_last_line),
            duration_s=float(duration) if math.isfinite(duration) else 0.0,
            truncated=bool(self.truncated) or cut, details=_small(self.details))

    def render(self, error_style: str = "full") -> str:
        """The text the model reads: stdout, the final expression's value, stderr, the error
        (the whole trimmed traceback, or only its last line as ToRL does)."""
        error = self.error if error_style == "full" else self.error_last_line
        parts = [self.stdout, self.value, self.stderr, error]
        return "\n".join(p.rstrip("\n") for p in parts if p)

    def metadata(self) -> dict[str, Any]:
        """Small structured facts for the ledger: never a second copy of the output (the
        result text holds it).  The error's last line is cut to ``META_LINE_CHARS``."""
        last = self.error_last_line
        meta: dict[str, Any] = {"truncated": self.truncated, "restarted": self.lost_state,
                                "duration_s": round(self.duration_s, 6),
                                "has_value": self.value is not None}
        if last:
            meta["error_last_line"] = truncate_text(last, META_LINE_CHARS)[0]
            m = _ERROR_TYPE.match(last)
            if m and self.status in (Status.ERROR, Status.KILLED, Status.TIMEOUT):
                meta["error_type"] = m.group(1)
        return {**meta, **self.details}


def _small(details: Any) -> dict[str, Any]:
    """Only the known detail keys, as numbers or short strings."""
    out: dict[str, Any] = {}
    if not isinstance(details, dict):
        return out
    for key in _DETAIL_KEYS:
        v = details.get(key)
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, (int, float)) and math.isfinite(v):
            out[key] = v
        elif isinstance(v, str):
            out[key] = escape_controls(v[:64])
    return out
