"""Per-session limits of the Python tool, validated once with errors that name the argument."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from tir_envs.validation import check_positive_int, check_positive_number


@dataclass(frozen=True)
class Limits:
    """What one session may use.

    * ``timeout_s``: wall-clock seconds per call; then the cell is interrupted, and killed
      (losing the session's variables) if it does not stop within the grace period.
    * ``memory_mb``: address space the code may add to the pre-imported interpreter.
    * ``cpu_s``: CPU seconds per process (a runaway background process is killed by it; the
      main interpreter raises ``CPULimitExceeded`` first): over a stateful session's life,
      per call for a stateless one (each cell from 0; its template has none, see
      ``sandbox/interpreter._setup``).
    * ``nproc``: processes and threads the session may run at once (fork bombs).
    * ``nofile``: open file descriptors per process.
    * ``fsize_mb``: largest file the code may write (also bounds fd-level output).
    * ``max_output_chars``: characters kept of stdout, of stderr and of a traceback; the cut
      keeps the head and the tail and is marked.
    """

    timeout_s: float = 10.0
    memory_mb: int | None = 1024
    cpu_s: int | None = 300
    nproc: int | None = 64
    nofile: int | None = 256
    fsize_mb: int | None = 64
    max_output_chars: int = 8192

    def __post_init__(self) -> None:
        check_positive_number(timeout_s=self.timeout_s, unit="seconds")
        check_positive_int(memory_mb=self.memory_mb, cpu_s=self.cpu_s, nproc=self.nproc,
                           nofile=self.nofile, fsize_mb=self.fsize_mb, allow_none=True,
                           hint="None means no limit")
        check_positive_int(max_output_chars=self.max_output_chars)
        if self.nofile is not None and self.nofile < 16:
            raise ValueError(f"nofile must be at least 16 (the interpreter needs a few), "
                             f"got {self.nofile}")

    def process_limits(self) -> dict:
        """The limits the interpreter process applies to itself (``sandbox/jail.py``)."""
        d = asdict(self)
        return {k: d[k] for k in ("memory_mb", "cpu_s", "nproc", "nofile", "fsize_mb")}
