"""Server-sent events, as the three wire APIs stream them.

A completion is generated whole (the policy contract returns ids, not a stream) and then sent
as the API's event sequence.  A client that disconnects mid-stream ends only its own response:
the completion is already in its episode's ledger, and ``ClientGone`` stops the writes.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web


class ClientGone(Exception):
    """The client closed the connection while events were being written."""


async def open_stream(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                       "Cache-Control": "no-cache"})
    await resp.prepare(request)
    return resp


async def send(resp: web.StreamResponse, data: Any, event: str | None = None) -> None:
    """One event: ``data`` as JSON (or a raw string such as ``[DONE]``)."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    try:
        await resp.write(f"{head}data: {payload}\n\n".encode())
    except (ConnectionResetError, ConnectionError, RuntimeError) as exc:
        raise ClientGone(str(exc)) from None


async def close(resp: web.StreamResponse) -> web.StreamResponse:
    try:
        await resp.write_eof()
    except (ConnectionResetError, ConnectionError, RuntimeError):
        pass
    return resp
