"""Who may reach a tir-envs server: the one access policy, free of any web framework.

Every server the project runs (``serve mcp`` and ``serve openenv`` on ASGI, the gateway on
aiohttp) decides the same questions before its app does any work, here, so a rule changed once
holds for all of them; ``tir_envs.serving.guard`` (ASGI) and ``tir_envs.gateway.server``
(aiohttp) are thin adapters that turn a request into ``(path, headers, query)`` and a
``Refusal`` into a response.  It sits at the package root, below both: the serving command
line starts the gateway, so neither folder may import the other's policy.

* **Origin**: a browser always sends ``Origin``, other clients never need to, so a request
  carrying one that is not the server's own loopback origin or configured
  (``allow_origins``) is a web page driving a local server: 403.
* **Host**: bound to loopback, a ``Host`` that does not name this machine is DNS rebinding
  (a page's own name re-pointed at 127.0.0.1): 403.
* **Token**: ``Authorization: Bearer TOKEN``, ``Basic`` with TOKEN as the password (what a
  WebSocket client sends for ``ws://tir:TOKEN@host/``), ``x-api-key: TOKEN`` (Anthropic's
  clients) or ``?token=TOKEN``.  A token given is always required; one generated at start is
  required when bound beyond loopback.  A server whose credentials are per session (the
  gateway: one key per episode) checks them itself from ``offered_tokens`` and sets
  ``server_token=False``.
* **Size**: a body over ``max_body_bytes`` is 413, by its ``Content-Length`` before it is
  read and by its size as it is read.
"""

from __future__ import annotations

import base64
import hmac
import ipaddress
import os
import secrets
from dataclasses import dataclass, field
from typing import Mapping
from urllib.parse import parse_qs

#: the environment variable a token may come from (so it stays out of the process list)
TOKEN_ENV = "TIR_ENVS_TOKEN"
MAX_BODY_BYTES = 1 << 20
WS_MAX_BYTES = 1 << 20
MAX_PER_CLIENT = 16
#: paths answered without a token (a load balancer's health probe); never an env's work
OPEN_PATHS = ("/health",)
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


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


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: the HTTP status, a message naming the fix, a short code."""

    status: int
    message: str
    code: str


class Access:
    """The decisions of the module docstring for one server (``port``: the bound one)."""

    def __init__(self, config: GuardConfig, *, server_token: bool = True,
                 open_paths: tuple[str, ...] = OPEN_PATHS):
        self.config = config
        self.port = config.port
        self.loopback = is_loopback(config.host)  # once: it is asked on every request
        self.server_token = server_token
        self.open_paths = open_paths

    def refusal(self, path: str, headers: Mapping[str, str],
                query: str = "") -> Refusal | None:
        """The first rule ``(path, headers, query)`` breaks, or ``None``; ``headers`` keyed in
        lower case."""
        origin = headers.get("origin")
        if origin is not None and origin not in self.config.origins(self.port):
            return Refusal(403, f"origin {origin!r} is not allowed: this server serves local "
                           "programs, not web pages (allow one with --allow-origin / "
                           "allow_origins=)", "forbidden_origin")
        if self.loopback and not self.own_host(headers.get("host", "")):
            return Refusal(403, "the Host header does not name this server (bound to "
                           "loopback: send Host: 127.0.0.1 or localhost)", "forbidden_host")
        if not self.server_token or path in self.open_paths or not self.config.token_required:
            return None
        token = self.config.token or ""
        if not any(hmac.compare_digest(o.encode(), token.encode())
                   for o in offered_tokens(headers, query)):
            return Refusal(401, "a token is required (Authorization: Bearer TOKEN, printed "
                           "at start)", "invalid_api_key")
        return None

    def own_host(self, host: str) -> bool:
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return name.strip("[]") in (*LOOPBACK_NAMES, self.config.host)

    def length_refusal(self, content_length: str | None) -> Refusal | None:
        """A declared ``Content-Length`` over the cap (or not a number), before reading."""
        if content_length is None:
            return None
        if not content_length.isdigit():
            return Refusal(400, f"Content-Length {content_length!r} is not a byte count",
                           "invalid_request_error")
        return self.size_refusal(int(content_length))

    def size_refusal(self, size: int) -> Refusal | None:
        limit = self.config.max_body_bytes
        if size <= limit:
            return None
        return Refusal(413, f"the request body is over {limit} bytes (the server's "
                       "max_body_bytes); send a shorter one", "request_too_large")


def offered_tokens(headers: Mapping[str, str], query: str = "") -> list[str]:
    """Every credential a request offers, in the places the module docstring lists."""
    offered = []
    scheme, _, value = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        offered.append(value.strip())
    elif scheme.lower() == "basic":
        try:
            offered.append(base64.b64decode(value.strip()).decode().partition(":")[2])
        except (ValueError, UnicodeDecodeError):
            pass
    key = headers.get("x-api-key", "").strip()
    if key:
        offered.append(key)
    if query:
        offered.extend(parse_qs(query).get("token", []))
    return offered
