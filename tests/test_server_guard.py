"""``tir_envs.serving.guard``: what stands before every server's app (token, Origin, Host,
size and connection caps, quiet disconnects), driven as ASGI directly: no sockets."""

from __future__ import annotations

import asyncio
import base64

import pytest

from tir_envs.serving.guard import Guard, GuardConfig, is_loopback


class App:
    """An ASGI app that records what reached it."""

    def __init__(self, raise_on_ws: BaseException | None = None):
        self.seen: list[tuple[str, bytes]] = []
        self.raise_on_ws = raise_on_ws

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket":
            self.seen.append(("ws", b""))
            if self.raise_on_ws is not None:
                raise self.raise_on_ws
            await send({"type": "websocket.accept"})
            return
        message = await receive()
        self.seen.append(("http", message.get("body", b"")))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def run(guard: Guard, kind: str = "http", headers=(), body: bytes = b"", path: str = "/step",
        query: bytes = b"", client: str = "127.0.0.1"):
    sent: list[dict] = []
    chunks = [{"type": "http.request", "body": body, "more_body": False}]
    scope = {"type": kind, "path": path, "query_string": query, "client": (client, 5000),
             "headers": [(b"host", b"127.0.0.1:8000"),
                         *[(k.encode(), v.encode()) for k, v in headers]]}

    async def receive():
        return chunks.pop(0) if chunks else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)
    asyncio.run(guard(scope, receive, send))
    return sent


def status(sent):
    first = sent[0]
    return first.get("status") if first["type"] == "http.response.start" else first["type"]


def test_a_foreign_origin_is_refused_on_http_and_websocket():
    app = App()
    guard = Guard(app, GuardConfig(port=8000))
    assert status(run(guard, headers=[("origin", "http://evil.example")])) == 403
    sent = run(guard, "websocket", headers=[("origin", "http://evil.example")])
    assert sent[0] == {"type": "websocket.close", "code": 1008, "reason": sent[0]["reason"]}
    assert not app.seen
    assert status(run(guard, headers=[("origin", "http://127.0.0.1:8000")])) == 200
    allowed = Guard(app, GuardConfig(port=8000, allow_origins=("https://lab.example",)))
    assert status(run(allowed, headers=[("origin", "https://lab.example")])) == 200


def test_a_rebound_host_name_is_refused_on_loopback():
    guard = Guard(App(), GuardConfig(port=8000))
    sent = []
    scope = {"type": "http", "path": "/", "headers": [(b"host", b"attacker.example:8000")]}

    async def send(m):
        sent.append(m)

    async def receive():
        return {"type": "http.request", "body": b""}
    asyncio.run(guard(scope, receive, send))
    assert status(sent) == 403


def test_beyond_loopback_a_token_is_required_and_checked():
    app = App()
    config = GuardConfig(host="0.0.0.0", port=8000, token="s3cret")
    guard = Guard(app, config)
    assert config.token_required and not is_loopback("0.0.0.0") and is_loopback("::1")
    assert status(run(guard)) == 401
    assert status(run(guard, headers=[("authorization", "Bearer wrong")])) == 401
    assert status(run(guard, headers=[("authorization", "Bearer s3cret")])) == 200
    basic = base64.b64encode(b"tir:s3cret").decode()  # ws://tir:TOKEN@host, for OpenEnv's client
    assert run(guard, "websocket", headers=[("authorization", f"Basic {basic}")])[0] == \
        {"type": "websocket.accept"}
    assert status(run(guard, query=b"token=s3cret")) == 200
    assert status(run(guard, path="/health")) == 200  # a health probe needs none


def test_a_generated_token_is_required_only_beyond_loopback(monkeypatch):
    monkeypatch.delenv("TIR_ENVS_TOKEN", raising=False)
    local, remote = GuardConfig(), GuardConfig(host="0.0.0.0")
    assert len(local.token) > 20 and local.token != remote.token
    assert not local.token_required and remote.token_required
    monkeypatch.setenv("TIR_ENVS_TOKEN", "from-env")
    given = GuardConfig()
    assert given.token == "from-env" and given.token_required


def test_request_bodies_are_capped_before_the_app_reads_them():
    app = App()
    guard = Guard(app, GuardConfig(max_body_bytes=100))
    assert status(run(guard, body=b"x" * 101)) == 413
    assert status(run(guard, headers=[("content-length", "5000000")])) == 413
    assert status(run(guard, body=b"x" * 100)) == 200 and app.seen[-1] == ("http", b"x" * 100)


def test_websockets_per_client_are_capped():
    app = App()
    guard = Guard(app, GuardConfig(max_per_client=1))
    guard._per_client["10.0.0.9"] = 1  # one open already
    sent = run(guard, "websocket", client="10.0.0.9")
    assert sent[0]["type"] == "websocket.close" and not app.seen
    assert run(guard, "websocket", client="10.0.0.8")[0]["type"] == "websocket.accept"


def test_a_normal_disconnect_is_quiet_and_a_real_fault_is_not():
    from starlette.websockets import WebSocketDisconnect
    run(Guard(App(raise_on_ws=WebSocketDisconnect(1000)), GuardConfig()), "websocket")
    with pytest.raises(ValueError):
        run(Guard(App(raise_on_ws=ValueError("a bug")), GuardConfig()), "websocket")


def test_bad_caps_are_refused_by_name():
    with pytest.raises(ValueError, match="max_body_bytes"):
        GuardConfig(max_body_bytes=0)
