"""The outcome of running one cell, common to every backend, and how it reads to the model."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tir_envs.tools.base import ToolStatus

LOST_STATE_NOTE = "The interpreter has been reset: variables from earlier calls are gone."


@dataclass
class Execution:
    """What a backend reports for one cell.

    ``error`` is the full trimmed traceback (or a one-line explanation when there is no Python
    exception, e.g. a timeout), ``error_last_line`` its last line.  ``lost_state`` says the
    interpreter is gone and the next call starts a fresh one.
    """

    status: ToolStatus
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
    def failure(cls, status: ToolStatus, message: str, *, lost_state: bool = False,
                stdout: str = "", stderr: str = "", **details: Any) -> "Execution":
        """An outcome without a Python traceback (timeout, kill, infrastructure)."""
        if lost_state:
            message = f"{message} {LOST_STATE_NOTE}"
        return cls(status, stdout=stdout, stderr=stderr, error=message,
                   error_last_line=message, lost_state=lost_state, details=dict(details))

    def render(self, error_style: str = "full") -> str:
        """The text the model reads: stdout, the final expression's value, stderr, the error
        (the whole trimmed traceback, or only its last line as ToRL does)."""
        error = self.error if error_style == "full" else self.error_last_line
        parts = [self.stdout, self.value, self.stderr, error]
        return "\n".join(p.rstrip("\n") for p in parts if p)

    def metadata(self) -> dict[str, Any]:
        return {"stdout": self.stdout, "stderr": self.stderr, "value": self.value,
                "error": self.error, "error_last_line": self.error_last_line,
                "truncated": self.truncated, "restarted": self.lost_state,
                "duration_s": self.duration_s, **self.details}
