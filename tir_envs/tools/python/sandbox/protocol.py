"""Length-prefixed frames between the host and a sandboxed interpreter.

Host → interpreter: JSON objects (``encode``); the host is trusted.  Interpreter → host: the
``ready`` hello (JSON, small) and one *result frame* per cell, a fixed binary header followed by
five UTF-8 fields (``encode_result`` / ``decode_result``).  The host reads what untrusted code
may have forged, so a result is parsed with ``struct`` and byte slices only: no recursion, no
object per element, time and memory linear in a frame whose size the host caps from the output
limits (``result_frame_cap``).  Never pickle.

A result carries the 64-bit nonce of the request it answers; the host drops the session on a
mismatch (a frame written by the code itself, or a stale one).

Every message kind of both channels (the fork server's control socket and a session's socket)
is an ``Op``, defined here once and used by both ends.
"""

from __future__ import annotations

import enum
import json
import math
import socket
import struct
from typing import Any

HEADER = struct.Struct("!I")
MAX_FRAME = 32 * 1024 * 1024
RESULT_TAG = b"R"
RESULT = struct.Struct("!QBBdd5I")  # nonce, status, flags, duration_s, cpu_s, 5 field lengths
# What an interpreter may say of its own cell: the words of ``tir_envs.status.Status`` (this
# package imports nothing of tir_envs; a test ties the two) for the ends the model's code can
# reach by itself (never ``infra_error``: only the host observes that), and which limit killed.
STATUSES = ("ok", "error", "timeout", "killed")
LIMITS = ("cpu", "memory")
FIELDS = ("stdout", "stderr", "value", "error", "error_last_line")
_TRUNCATED, _HAS_VALUE, _HAS_ERROR, _CPU, _MEMORY = 1, 2, 4, 8, 16
_LIMIT_FLAGS = {"cpu": _CPU, "memory": _MEMORY}
MARGIN_CHARS = 256  # the truncation marker and the like, on top of the character limit


class Op(str, enum.Enum):
    """The ``op`` of every JSON message (a ``str``: it is what goes on the wire)."""

    # host -> fork server (control socket; ``spawn`` carries the session's descriptors)
    SPAWN = "spawn"            # sid, uid: fork a session on the socket passed with it
    SIGNAL = "signal"          # sid, sig ("TERM", "INT"): signal that session
    EXIT = "exit"              # stop every session and exit (also: the socket closes)
    # fork server -> host (control socket)
    READY = "ready"            # the fork server serves (also a session's hello, below)
    FAILED = "failed"          # the fork server could not start: error
    SPAWNED = "spawned"        # sid: forked
    SPAWN_FAILED = "spawn_failed"  # sid, error: could not be forked
    EXITED = "exited"          # sid, code, signal, keeper_signal: the session is gone
    # host -> session
    SETUP = "setup"            # limits, fresh: once, before any code of the model
    RUN = "run"                # code, max_chars, nonce: one cell
    # session -> host (``READY`` is its hello; results are binary frames, ``RESULT_TAG``)
    SETUP_OK = "setup_ok"
    SETUP_ERROR = "setup_error"
    RESULT = "result"          # what ``decode_result`` returns

    def __str__(self) -> str:
        return self.value


class ProtocolError(Exception):
    """The peer sent bytes that are not a valid frame."""


def frame(body: bytes) -> bytes:
    if len(body) > MAX_FRAME:
        raise ProtocolError(f"frame of {len(body)} bytes exceeds {MAX_FRAME}")
    return HEADER.pack(len(body)) + body


def encode(obj: Any) -> bytes:
    """One JSON frame (compact ASCII)."""
    return frame(json.dumps(obj, separators=(",", ":")).encode("ascii"))


def field_cap(max_chars: int) -> int:
    """Most bytes one result field may hold for ``max_chars`` characters (UTF-8: 4 a char)."""
    return 4 * (int(max_chars) + MARGIN_CHARS)


def result_frame_cap(max_chars: int) -> int:
    """Largest result frame body the host accepts for ``max_chars``."""
    return 1 + RESULT.size + len(FIELDS) * field_cap(max_chars)


def encode_result(nonce: int, reply: dict) -> bytes:
    """The interpreter's result frame for one cell (``reply`` as built by the interpreter)."""
    parts = [(reply.get(name) or "").encode("utf-8", "replace") for name in FIELDS]
    flags = ((_TRUNCATED if reply.get("truncated") else 0)
             | (_HAS_VALUE if reply.get("value") is not None else 0)
             | (_HAS_ERROR if reply.get("error") is not None else 0)
             | _LIMIT_FLAGS.get(reply.get("limit") or "", 0))
    head = RESULT.pack(nonce & (2**64 - 1), STATUSES.index(reply["status"]), flags,
                       float(reply.get("duration_s") or 0.0), float(reply.get("cpu_s") or 0.0),
                       *(len(p) for p in parts))
    return frame(RESULT_TAG + head + b"".join(parts))


def _seconds(x: float) -> float:
    return min(max(x, 0.0), 1e7) if math.isfinite(x) else 0.0


def decode_result(body: bytes, max_field_bytes: int) -> dict:
    """Validate and parse a result frame body; raise ``ProtocolError`` on anything off.

    Every field is checked against ``max_field_bytes`` before it is decoded; the status must be
    one an interpreter may claim (``STATUSES``); times are clamped to finite, non-negative
    seconds.  The caller still decides what the status *means* (whether the code was
    interrupted is the host's to know: a reply never chooses the final status on its own).
    """
    if not body.startswith(RESULT_TAG) or len(body) < 1 + RESULT.size:
        raise ProtocolError("not a result frame")
    nonce, code, flags, duration, cpu, *lengths = RESULT.unpack_from(body, 1)
    if code >= len(STATUSES):
        raise ProtocolError(f"unknown result kind (status code {code})")
    status = STATUSES[code]
    limit = ("cpu" if flags & _CPU else "memory" if flags & _MEMORY else None
             ) if status == "killed" else None
    if any(n > max_field_bytes for n in lengths):
        raise ProtocolError(f"a result field exceeds {max_field_bytes} bytes")
    pos = 1 + RESULT.size
    if pos + sum(lengths) != len(body):
        raise ProtocolError("result field lengths do not add up to the frame")
    texts = {}
    for name, n in zip(FIELDS, lengths):
        texts[name] = body[pos:pos + n].decode("utf-8", "replace")
        pos += n
    return {"op": Op.RESULT, "nonce": nonce, "status": status, "limit": limit,
            "truncated": bool(flags & _TRUNCATED), "duration_s": _seconds(duration),
            "cpu_s": _seconds(cpu), "stdout": texts["stdout"], "stderr": texts["stderr"],
            "value": texts["value"] if flags & _HAS_VALUE else None,
            "error": texts["error"] if flags & _HAS_ERROR else None,
            "error_last_line": texts["error_last_line"] if flags & _HAS_ERROR else None}


def parse_small_json(body: bytes) -> dict | None:
    """A small JSON object from a session (the host reads one only before any code of the
    model ran there: a hello, a setup answer), or None if it is anything else."""
    if not body.startswith(b"{"):
        return None
    try:
        msg = json.loads(body)
    except Exception:  # noqa: BLE001 - RecursionError included
        return None
    return msg if isinstance(msg, dict) else None


def send(sock: socket.socket, obj: Any) -> None:
    """Send one JSON frame on a blocking socket."""
    sock.sendall(encode(obj))


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            return None
        got += k
    return bytes(buf)


def recv_body(sock: socket.socket, max_frame: int = MAX_FRAME) -> bytes | None:
    """Read one frame body from a blocking socket; ``None`` at a clean end of stream."""
    head = _recv_exact(sock, HEADER.size)
    if head is None:
        return None
    (size,) = HEADER.unpack(head)
    if size > max_frame:
        raise ProtocolError(f"frame of {size} bytes exceeds {max_frame}")
    body = _recv_exact(sock, size)
    if body is None:
        raise ProtocolError("stream ended inside a frame")
    return body


def recv(sock: socket.socket) -> Any:
    """Read one JSON frame from a blocking socket; ``None`` at a clean end of stream."""
    body = recv_body(sock)
    return None if body is None else json.loads(body)


class Decoder:
    """Incremental frame splitter for non-blocking readers: ``push`` bytes, ``pop`` whole
    frame bodies one at a time.  ``max_frame`` may change between pops (the host sets it from
    what it expects next); a frame announced larger is refused before its body is buffered."""

    def __init__(self, max_frame: int = MAX_FRAME):
        self.max_frame = max_frame
        self._buf = bytearray()

    def push(self, data: bytes) -> None:
        self._buf += data

    def pop(self) -> bytes | None:
        """The next whole frame body, or None until more bytes arrive."""
        if len(self._buf) < HEADER.size:
            return None
        (size,) = HEADER.unpack_from(self._buf)
        if size > self.max_frame:
            raise ProtocolError(f"frame of {size} bytes exceeds {self.max_frame}")
        end = HEADER.size + size
        if len(self._buf) < end:
            return None
        body = bytes(self._buf[HEADER.size:end])
        del self._buf[:end]
        return body

    def feed(self, data: bytes) -> list[bytes]:
        """``push`` then every whole frame body."""
        self.push(data)
        bodies = []
        while (body := self.pop()) is not None:
            bodies.append(body)
        return bodies

    @property
    def pending(self) -> int:
        return len(self._buf)
