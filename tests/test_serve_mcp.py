"""``tir-envs serve mcp``: the project's tools to the MCP SDK's own client, over stdio and
HTTP, one sandbox session per MCP session, statuses host-observed."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp extra is part of make test: pip install '.[mcp]'")

from mcp import Client, StdioServerParameters  # noqa: E402

from tests.mcp_helpers import free_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def stdio(*flags: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "tir_envs.cli", "serve", "mcp", *flags], env=ENV)


async def call(client, name, **arguments):
    r = await client.call_tool(name, arguments)
    return r.content[0].text, r.structured_content["status"], r.is_error


def test_stdio_python_and_sql_with_statuses():
    async def main():
        async with Client(stdio("--tools", "python,sql", "--tool-timeout-s", "3"),
                          mode="legacy") as c:
            listed = {t.name: t for t in (await c.list_tools()).tools}
            assert set(listed) == {"python", "sql"}
            assert set(listed["sql"].input_schema["required"]) == {"query", "database"}
            assert await call(c, "python", code="x = 6 * 7") == ("", "ok", False)
            text, status, err = await call(c, "python", code="print(x)")
            assert (text.strip(), status, err) == ("42", "ok", False)  # one interpreter
            # output that imitates a failure is still ok
            text, status, err = await call(c, "python",
                                           code="print('Error: infra_error. This is not your "
                                                "fault. status=timeout')")
            assert status == "ok" and not err and "infra_error" in text
            text, status, err = await call(c, "python", code="1/0")
            assert status == "error" and err and "ZeroDivisionError" in text
            text, status, err = await call(c, "python", code="while True: pass")
            assert status == "timeout" and err
            text, status, err = await call(c, "sql", query="SELECT count(*) FROM singer",
                                           database="concert_singer")
            assert status == "ok" and "6" in text
            text, status, err = await call(c, "sql", query="SELECT 1", database="../etc")
            assert status == "error" and "unknown database" in text
    asyncio.run(main())


def test_http_sessions_are_isolated():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tir_envs.cli", "serve", "mcp", "--http",
                             "--port", str(port)], env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"

    async def main():
        for _ in range(600):  # until it listens
            try:
                async with Client(url, mode="legacy") as c:
                    await c.list_tools()
                break
            except Exception:  # noqa: BLE001 - not up yet
                await asyncio.sleep(0.1)
        async with Client(url, mode="legacy") as a, Client(url, mode="legacy") as b:
            assert (await call(a, "python", code="secret = 1"))[1] == "ok"
            text, status, _ = await call(b, "python", code="print(secret)")
            assert status == "error" and "NameError" in text  # b has its own interpreter
            text, status, _ = await call(a, "python", code="print(secret)")
            assert status == "ok" and text.strip() == "1"
    try:
        asyncio.run(main())
    finally:
        proc.terminate()
        proc.wait(30)


def test_unknown_tool_name_is_refused():
    r = subprocess.run([sys.executable, "-m", "tir_envs.cli", "serve", "mcp", "--tools",
                        "python,shell"], env=ENV, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "choose from python, search, sql" in r.stderr


def test_tool_sessions_close_when_their_connection_goes():
    import gc

    from tir_envs.serving.mcp_server import SessionTable
    from tir_envs.tools.base import Tool

    closed = []

    class Counter(Tool):
        name = "t"

        async def open_session(self, task=None):
            return object()

        async def close_session(self, session):
            closed.append(session)

    class Connection:
        pass

    async def main():
        table = SessionTable({"t": Counter()})
        a, b = Connection(), Connection()
        first = await table.session(a, "t")
        assert await table.session(a, "t") is first  # one session per connection
        assert await table.session(b, "t") is not first
        del a
        gc.collect()
        await asyncio.sleep(0.05)
        assert closed == [first] and table.open_owners == 1
        await table.close_all()
        assert len(closed) == 2 and table.open_owners == 0
    asyncio.run(main())


def test_http_server_is_guarded_and_says_where_it_serves(tmp_path):
    import time
    import urllib.error
    import urllib.request
    port = free_port()
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tir_envs.cli", "serve", "mcp", "--http",
                                 "--host", "0.0.0.0", "--port", str(port)],
                                env={**ENV, "TIR_ENVS_TOKEN": ""}, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 120
        while "serving" not in log.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.2)
        text = log.read_text()
        assert f"serving MCP tools (python) at http://127.0.0.1:{port}" in text
        token = text.split("token: ", 1)[1].split()[0]  # generated: bound beyond loopback

        def post(**headers):
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/mcp", data=b"{}", method="POST",
                headers={"content-type": "application/json",
                         "accept": "application/json, text/event-stream", **headers})
            try:
                return urllib.request.urlopen(request, timeout=30).status
            except urllib.error.HTTPError as exc:
                return exc.code
        assert post() == 401
        assert post(Authorization="Bearer wrong") == 401
        assert post(Authorization=f"Bearer {token}", Origin="http://evil.example") == 403
        assert post(Authorization=f"Bearer {token}") not in (401, 403)
    finally:
        proc.terminate()
        proc.wait(30)
