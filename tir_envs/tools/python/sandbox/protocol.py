"""Length-prefixed JSON frames between the host and a sandboxed interpreter.

JSON, never pickle: the host reads what untrusted code may have forged, so a frame must not be
able to run anything on the way in.  Frames larger than ``MAX_FRAME`` are refused.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

HEADER = struct.Struct("!I")
MAX_FRAME = 32 * 1024 * 1024


class ProtocolError(Exception):
    """The peer sent bytes that are not a valid frame."""


def encode(obj: Any) -> bytes:
    """One frame: a 4-byte big-endian length, then compact ASCII JSON."""
    data = json.dumps(obj, separators=(",", ":")).encode("ascii")
    if len(data) > MAX_FRAME:
        raise ProtocolError(f"frame of {len(data)} bytes exceeds {MAX_FRAME}")
    return HEADER.pack(len(data)) + data


def send(sock: socket.socket, obj: Any) -> None:
    """Send one frame on a blocking socket."""
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


def recv(sock: socket.socket) -> Any:
    """Read one frame from a blocking socket; ``None`` at a clean end of stream."""
    head = _recv_exact(sock, HEADER.size)
    if head is None:
        return None
    (size,) = HEADER.unpack(head)
    if size > MAX_FRAME:
        raise ProtocolError(f"frame of {size} bytes exceeds {MAX_FRAME}")
    body = _recv_exact(sock, size)
    if body is None:
        raise ProtocolError("stream ended inside a frame")
    return json.loads(body)


class Decoder:
    """Incremental frame decoder for non-blocking readers: ``feed`` bytes, get whole frames."""

    def __init__(self, max_frame: int = MAX_FRAME):
        self.max_frame = max_frame
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        self._buf += data
        frames = []
        while len(self._buf) >= HEADER.size:
            (size,) = HEADER.unpack_from(self._buf)
            if size > self.max_frame:
                raise ProtocolError(f"frame of {size} bytes exceeds {self.max_frame}")
            end = HEADER.size + size
            if len(self._buf) < end:
                break
            body = bytes(self._buf[HEADER.size:end])
            del self._buf[:end]
            try:
                frames.append(json.loads(body))
            except ValueError as exc:
                raise ProtocolError(f"invalid JSON frame: {exc}") from None
        return frames

    @property
    def pending(self) -> int:
        return len(self._buf)
