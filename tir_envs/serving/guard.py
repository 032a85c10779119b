"""What every tir-envs ASGI server puts in front of its app: the access policy, per-client
connection caps, quiet disconnects and a "serving at" line.

A server on a developer's machine is reachable by every web page the developer opens (a page
may open a WebSocket to ``127.0.0.1``, or rebind a name to it), and one bound to ``0.0.0.0``
by anyone on the network.  What is refused (a foreign ``Origin``, a rebound ``Host``, a missing
or wrong token, an oversized body) is decided in ``tir_envs.access``, the one policy
the gateway's aiohttp server applies too; ``Guard`` is its ASGI adapter, which also:

* reads a request body (bounded) before the app sees any of it, and gives WebSocket message
  caps (``ws_max_bytes``) to uvicorn;
* caps open WebSockets per client address (``max_per_client``, 429);
* lets a client that closes normally go without a traceback (Starlette raises
  ``WebSocketDisconnect`` when the app closes a socket the client already closed).

``serve(app, config, what=...)`` runs uvicorn with the guard and prints
``serving WHAT at URL`` (and the token) once it accepts connections.  Every ``tir-envs serve``
uses it: ``GuardConfig``, ``Guard``, ``serve``, ``add_arguments`` and ``config_from_args``
are the API.
"""

from __future__ import annotations

import sys
from typing import Any, Awaitable, Callable

from tir_envs.envs.openenv_local import is_disconnect, quiet
from tir_envs.access import (MAX_BODY_BYTES, MAX_PER_CLIENT, TOKEN_ENV, Access,
                                     GuardConfig, Refusal, is_loopback)

__all__ = ["Guard", "GuardConfig", "add_arguments", "announce", "config_from_args",
           "is_disconnect", "is_loopback", "quiet", "serve", "serve_async"]

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class Guard:
    """The ASGI adapter of ``tir_envs.access`` (see the module docstring)."""

    def __init__(self, app: Any, config: GuardConfig):
        self.app, self.config = app, config
        self.access = Access(config)
        self._per_client: dict[str, int] = {}

    @property
    def port(self) -> int:
        return self.access.port

    @port.setter
    def port(self, value: int) -> None:
        self.access.port = value

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        refusal = self.access.refusal(scope.get("path") or "", _headers(scope),
                                      (scope.get("query_string") or b"").decode("latin-1"))
        if refusal is not None:
            return await _refuse(kind, send, refusal)
        if kind == "http":
            return await self._http(scope, receive, send)
        return await self._websocket(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = self.access.length_refusal(_headers(scope).get("content-length"))
        if refusal is not None:
            return await _refuse("http", send, refusal)
        body, more = [], True
        size = 0
        while more:  # read (bounded) before the app sees any of it
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            refusal = self.access.size_refusal(size)
            if refusal is not None:
                return await _refuse("http", send, refusal)
            body.append(chunk)
            more = message.get("more_body", False)
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(body), "more_body": False}
            return await receive()
        return await self.app(scope, replay, send)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = (scope.get("client") or ("?", 0))[0]
        if self._per_client.get(client, 0) >= self.config.max_per_client:
            return await _refuse("websocket", send, Refusal(
                429, f"{self.config.max_per_client} connections from this address are open "
                "already", "too_many_connections"))
        self._per_client[client] = self._per_client.get(client, 0) + 1
        try:
            await self.app(scope, receive, send)
        except Exception as exc:  # noqa: BLE001 - only a normal disconnect is swallowed
            if not is_disconnect(exc):
                raise
        finally:
            self._per_client[client] -= 1
            if not self._per_client[client]:
                del self._per_client[client]


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1")
            for k, v in scope.get("headers") or []}


async def _refuse(kind: str, send: Send, refusal: Refusal) -> None:
    if kind == "websocket":  # a close before accept: the server answers the handshake 403
        await send({"type": "websocket.close", "code": 1008, "reason": refusal.message[:120]})
        return
    body = ('{"error": %s}' % _json_str(refusal.message)).encode()
    await send({"type": "http.response.start", "status": refusal.status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _json_str(text: str) -> str:
    import json
    return json.dumps(text)


# ---------------------------------------------------------------------------- running
def serve(app: Any, config: GuardConfig, what: str, out: Any = None,
          log_level: str = "warning") -> None:
    """Run ``app`` behind ``Guard`` with uvicorn until interrupted; print
    ``serving WHAT at URL`` once connections are accepted."""
    import asyncio  # here: the command line's parser reads this module without a loop

    asyncio.run(serve_async(app, config, what, out, log_level))


async def serve_async(app: Any, config: GuardConfig, what: str, out: Any = None,
                      log_level: str = "warning") -> None:
    import asyncio

    import uvicorn

    guard = Guard(app, config)
    server = uvicorn.Server(uvicorn.Config(guard, host=config.host, port=config.port,
                                           log_level=log_level, ws_max_size=config.ws_max_bytes,
                                           lifespan="auto"))
    task = asyncio.ensure_future(server.serve())
    while not server.started and not task.done():
        await asyncio.sleep(0.05)
    if server.started:
        port = _bound_port(server) or config.port
        guard.port = port
        announce(config, what, port, out)
    await task


def announce(config: GuardConfig, what: str, port: int, out: Any = None) -> None:
    """The ready line (and how to authenticate), on ``out`` (default stderr)."""
    out = out or sys.stderr
    print(f"serving {what} at {config.url(port)}", file=out, flush=True)
    if config.token_required:
        shown = "(from --token/TIR_ENVS_TOKEN)" if config.token_given else config.token
        print(f"token: {shown}  (send 'Authorization: Bearer TOKEN', or "
              f"http://tir:TOKEN@host:port for WebSocket clients)", file=out, flush=True)
    else:
        print(f"token: not required on loopback (an allowed Origin or none; set "
              f"{TOKEN_ENV} or --token to require one)", file=out, flush=True)


def _bound_port(server: Any) -> int | None:
    for srv in getattr(server, "servers", []) or []:
        for sock in getattr(srv, "sockets", []) or []:
            return sock.getsockname()[1]
    return None


def add_arguments(parser: Any, port: int) -> None:
    """The options every guarded server takes."""
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (beyond loopback "
                        "a token is required)")
    parser.add_argument("--port", type=int, default=port, help="port (0: any free one)")
    parser.add_argument("--token", help=f"the token clients must send (default: "
                        f"${TOKEN_ENV}, else one generated and printed)")
    parser.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                        help="a browser origin allowed to connect (default: none but the "
                             "server's own)")
    parser.add_argument("--max-body-bytes", type=int, default=MAX_BODY_BYTES,
                        help="the largest request body or WebSocket message")
    parser.add_argument("--max-per-client", type=int, default=MAX_PER_CLIENT,
                        help="WebSocket connections one client address may hold open")


def config_from_args(args: Any) -> GuardConfig:
    return GuardConfig(host=args.host, port=args.port, token=args.token,
                       allow_origins=tuple(args.allow_origin),
                       max_body_bytes=args.max_body_bytes, ws_max_bytes=args.max_body_bytes,
                       max_per_client=args.max_per_client)
