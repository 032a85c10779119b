"""One access policy for every server (``tir_envs.access``): the gateway (aiohttp) and
``serve mcp`` / ``serve openenv`` (the ASGI ``Guard``) refuse the same hostile requests with
the same answer: a web page's Origin, a rebound Host, an oversized body (declared or streamed),
a request without a credential on a server bound beyond loopback."""

from __future__ import annotations

import asyncio
import json

import aiohttp

from tests.gateway_helpers import Answers
from tests.test_server_guard import App
from tir_envs.gateway import Gateway
from tir_envs.serving.guard import Guard, GuardConfig

LIMIT = 4096
BIG = b'{"model": "tir-policy", "messages": [{"role": "user", "content": "' + b"x" * 8000 + b'"}]}'


def asgi(guard: Guard, headers: dict[str, str], body: bytes = b"", chunks: int = 1):
    """``(status, error message)`` of one POST through the ASGI guard."""
    sent: list[dict] = []
    size = -(-len(body) // chunks) if body else 0
    parts = [body[i:i + size] for i in range(0, len(body), size)] if body else [b""]
    messages = [{"type": "http.request", "body": p, "more_body": i < len(parts) - 1}
                for i, p in enumerate(parts)]
    scope = {"type": "http", "path": "/mcp", "query_string": b"", "client": ("127.0.0.1", 1),
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}

    async def receive():
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)
    asyncio.run(guard(scope, receive, send))
    status = sent[0]["status"]
    return status, json.loads(sent[1]["body"])["error"] if status != 200 else ""


async def gateway_post(http, gw: Gateway, headers: dict[str, str], body: bytes = BIG[:0],
                       stream: bool = False):
    """``(status, error message)`` of one POST to the gateway over HTTP."""
    data = body or json.dumps({"model": "tir-policy",
                               "messages": [{"role": "user", "content": "hi"}]}).encode()

    async def chunked():
        for i in range(0, len(data), 1024):
            yield data[i:i + 1024]
    url = f"http://127.0.0.1:{gw.port}/v1/chat/completions"
    async with http.post(url, data=chunked() if stream else data, headers=headers) as resp:
        answer = await resp.json()
        return resp.status, answer["error"]["message"] if resp.status != 200 else ""


def test_both_servers_refuse_the_same_hostile_requests():
    async def main():
        out = {}
        async with aiohttp.ClientSession() as http:
            async with Gateway(Answers(), max_body_bytes=LIMIT) as gw:
                _, key = gw.open_episode()
                auth = {"Authorization": f"Bearer {key}"}
                port = gw.port
                out["ok"] = await gateway_post(http, gw, auth)
                out["origin"] = await gateway_post(http, gw, {**auth,
                                                              "Origin": "http://evil.example"})
                out["host"] = await gateway_post(http, gw, {**auth,
                                                            "Host": f"evil.example:{port}"})
                out["declared"] = await gateway_post(http, gw, auth, BIG)
                out["streamed"] = await gateway_post(http, gw, auth, BIG, stream=True)
            async with Gateway(Answers(), host="0.0.0.0") as wide:  # beyond loopback
                out["no_token"] = await gateway_post(http, wide, {})
        return out, port
    gateway, port = asyncio.run(main())

    app = App()
    token = "s3cret"
    local = Guard(app, GuardConfig(port=port, token=token, max_body_bytes=LIMIT))
    auth = {"Host": f"127.0.0.1:{port}", "Authorization": f"Bearer {token}"}
    guard = {
        "ok": asgi(local, auth, b"{}"),
        "origin": asgi(local, {**auth, "Origin": "http://evil.example"}),
        "host": asgi(local, {**auth, "Host": f"evil.example:{port}"}),
        "declared": asgi(local, {**auth, "Content-Length": str(len(BIG))}, BIG),
        "streamed": asgi(local, auth, BIG, chunks=8),
        "no_token": asgi(Guard(app, GuardConfig(host="0.0.0.0", port=port)),
                         {"Host": f"10.0.0.1:{port}"}),
    }
    assert gateway["ok"][0] == guard["ok"][0] == 200
    for case in ("origin", "host", "declared", "streamed"):
        assert gateway[case] == guard[case], case  # same status, same words: one policy
    assert gateway["origin"][0] == gateway["host"][0] == 403
    assert gateway["declared"][0] == 413 and str(LIMIT) in gateway["declared"][1]
    assert gateway["no_token"][0] == guard["no_token"][0] == 401
    assert len(app.seen) == 1  # only the good request reached the app
