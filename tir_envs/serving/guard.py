"""What every tir-envs server puts in front of its app: a token, an Origin allow-list, size
caps, per-client connection caps, quiet disconnects and a "serving at" line.

A server on a developer's machine is reachable by every web page the developer opens (a page
may open a WebSocket to ``127.0.0.1``, or rebind a name to it), and one bound to ``0.0.0.0``
by anyone on the network.  ``Guard`` is an ASGI middleware that, before the app sees a request:

* checks the **token**: ``Authorization: Bearer TOKEN``, or ``Basic`` with TOKEN as the
  password (what a WebSocket client sends for ``ws://tir:TOKEN@host/...``: OpenEnv's client
  cannot set headers), or ``?token=TOKEN``.  A token given (``--token`` or ``TIR_ENVS_TOKEN``)
  is always required; one generated at start (and printed) is required when the server is
  bound beyond loopback;
* refuses any request whose ``Origin`` is not allowed (the server's own loopback origins and
  ``--allow-origin``): a browser always sends ``Origin``, other clients never need to; and a
  ``Host`` that is not the server's own when bound to loopback (DNS rebinding);
* caps request bodies (``max_body_bytes``, 413) and WebSocket messages (``ws_max_bytes``,
  given to uvicorn), and open WebSockets per client address (``max_per_client``);
* lets a client that closes normally go without a traceback (Starlette raises
  ``WebSocketDisconnect`` when the app closes a socket the client already closed).

``serve(app, config, what=...)`` runs uvicorn with the guard and prints
``serving WHAT at URL`` (and the token) once it accepts connections.  The gateway and every
``tir-envs serve`` use it: ``GuardConfig``, ``Guard``, ``serve``, ``add_arguments`` and
``config_from_args`` are the API.
"""

from __future__ import annotations

import base64
import hmac
import ipaddress
import os
import secrets
import sys
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qs

from tir_envs.envs.openenv_local import is_disconnect, quiet

__all__ = ["Guard", "GuardConfig", "add_arguments", "announce", "config_from_args",
           "is_disconnect", "is_loopback", "quiet", "serve", "serve_async"]

#: the environment variable a token may come from (so it stays out of the process list)
TOKEN_ENV = "TIR_ENVS_TOKEN"
MAX_BODY_BYTES = 1 << 20
WS_MAX_BYTES = 1 << 20
MAX_PER_CLIENT = 16
#: paths answered without a token (a load balancer's health probe); never an env's work
OPEN_PATHS = ("/health",)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class GuardConfig:
    """How a server is guarded (see the module docstring)."""

    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None          # None: TIR_ENVS_TOKEN, else generated
    allow_origins: tuple[str, ...] = ()
    max_body_bytes: int = MAX_BODY_BYTES
    ws_max_bytes: int = WS_MAX_BYTES
    max_per_client: int = MAX_PER_CLIENT
    token_given: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        token = self.token or os.environ.get(TOKEN_ENV) or None
        self.token_given = token is not None
        self.token = token or secrets.token_urlsafe(24)
        for name in ("max_body_bytes", "ws_max_bytes", "max_per_client"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")

    @property
    def token_required(self) -> bool:
        return self.token_given or not is_loopback(self.host)

    def origins(self, port: int | None = None) -> set[str]:
        """Allowed origins: the server's own loopback ones and those configured."""
        port = port or self.port
        own = {f"{scheme}://{name}:{port}" for scheme in ("http", "https")
               for name in ("127.0.0.1", "localhost", "[::1]")}
        return own | set(self.allow_origins)

    def url(self, port: int | None = None) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        host = f"[{host}]" if ":" in host and not host.startswith("[") else host
        return f"http://{host}:{port or self.port}"


class Guard:
    """The ASGI middleware (see the module docstring)."""

    def __init__(self, app: Any, config: GuardConfig):
        self.app, self.config = app, config
        self.port = config.port
        self._per_client: dict[str, int] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        problem = self._refusal(scope)
        if problem is not None:
            return await _refuse(kind, send, *problem)
        if kind == "http":
            return await self._http(scope, receive, send)
        return await self._websocket(scope, receive, send)

    def _refusal(self, scope: Scope) -> tuple[int, str] | None:
        headers = _headers(scope)
        origin = headers.get("origin")
        if origin is not None and origin not in self.config.origins(self.port):
            return 403, f"origin {origin!r} is not allowed (start the server with " \
                        "--allow-origin to allow it)"
        if is_loopback(self.config.host) and not self._own_host(headers.get("host", "")):
            return 403, "the Host header does not name this server"
        if scope.get("path") in OPEN_PATHS or not self.config.token_required:
            return None
        if not self._has_token(scope, headers):
            return 401, "a token is required (Authorization: Bearer TOKEN)"
        return None

    def _own_host(self, host: str) -> bool:
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return name.strip("[]") in ("127.0.0.1", "localhost", "::1", self.config.host)

    def _has_token(self, scope: Scope, headers: dict[str, str]) -> bool:
        token = self.config.token or ""
        offered = []
        auth = headers.get("authorization", "")
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer":
            offered.append(value.strip())
        elif scheme.lower() == "basic":
            try:
                offered.append(base64.b64decode(value.strip()).decode().partition(":")[2])
            except (ValueError, UnicodeDecodeError):
                pass
        query = parse_qs((scope.get("query_string") or b"").decode("latin-1"))
        offered.extend(query.get("token", []))
        return any(hmac.compare_digest(o.encode(), token.encode()) for o in offered)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.config.max_body_bytes
        length = _headers(scope).get("content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            return await _refuse("http", send, 413, f"the request body is over {limit} bytes")
        body, more = [], True
        size = 0
        while more:  # read (bounded) before the app sees any of it
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return await _refuse("http", send, 413, f"the request body is over {limit} "
                                                        "bytes")
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
            return await _refuse("websocket", send, 429, f"{self.config.max_per_client} "
                                 "connections from this address are open already")
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


async def _refuse(kind: str, send: Send, status: int, reason: str) -> None:
    if kind == "websocket":  # a close before accept: the server answers the handshake 403
        await send({"type": "websocket.close", "code": 1008, "reason": reason[:120]})
        return
    body = ('{"error": %s}' % _json_str(reason)).encode()
    await send({"type": "http.response.start", "status": status,
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
