"""The E2B backend.  E2B is a cloud service, unreachable here, so the offline tests replace
only the network: a stand-in ``Sandbox`` answers with the messages the E2B service streams
(NDJSON), turned into the SDK's own ``Execution`` by the SDK's own ``parse_output``, and raises
the SDK's own exceptions.  Everything above that (the backend, the tool, statuses, restarts)
is the real code.  ``test_live_e2b`` talks to the real service when ``E2B_API_KEY`` is set."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

e2b = pytest.importorskip("e2b")
e2b_ci = pytest.importorskip("e2b_code_interpreter")
try:  # the exception the SDK raises when run_code's own timeout expires
    from e2b_code_interpreter.code_interpreter_sync import format_execution_timeout_error
except ImportError:  # pragma: no cover - older SDKs
    def format_execution_timeout_error():
        return e2b.TimeoutException("Execution timed out")
from e2b_code_interpreter.models import parse_output  # noqa: E402

from tests.sandbox_helpers import call, close_session, open_session  # noqa: E402
from tir_envs.tools.base import Status  # noqa: E402
from tir_envs.tools.python import PythonTool  # noqa: E402
from tir_envs.tools.python.backends.e2b import E2BBackend  # noqa: E402

RED_TRACEBACK = ("\x1b[0;31m---------------------------------------------------------------\x1b[0m\n"
                 "\x1b[0;31mZeroDivisionError\x1b[0m                Traceback (most recent call last)\n"
                 "Cell \x1b[0;32mIn[2], line 1\x1b[0m\n\x1b[0;32m----> 1\x1b[0m \x1b[38;5;241m1\x1b[39m"
                 "\x1b[38;5;241m/\x1b[39m\x1b[38;5;241m0\x1b[39m\n\n"
                 "\x1b[0;31mZeroDivisionError\x1b[0m: division by zero")
SCRIPTS = {
    "print('hi')\n1 + 1": [
        {"type": "stdout", "text": "hi\n", "timestamp": 1},
        {"type": "result", "text": "2", "is_main_result": True},
        {"type": "number_of_executions", "execution_count": 1}],
    "1/0": [{"type": "error", "name": "ZeroDivisionError", "value": "division by zero",
             "traceback": RED_TRACEBACK}],
    "x = bytearray(2**40)": [{"type": "error", "name": "MemoryError", "value": "",
                              "traceback": "MemoryError"}],
    "big": [{"type": "stdout", "text": "z" * 50_000, "timestamp": 1}],
    "warn": [{"type": "stderr", "text": "careful\n", "timestamp": 1},
             {"type": "result", "text": "None shown?", "is_main_result": False}],
}


class FakeSandbox:
    """The SDK's ``Sandbox`` interface, with scripted service replies instead of a network."""

    created: list[dict] = []
    killed: list["FakeSandbox"] = []
    fail_create: Exception | None = None

    @classmethod
    def create(cls, **kwargs):
        if cls.fail_create is not None:
            raise cls.fail_create
        cls.created.append(kwargs)
        return cls()

    def run_code(self, code: str, timeout: float | None = None):
        if code == "slow":
            raise format_execution_timeout_error()  # what the SDK raises on httpx.ReadTimeout
        if code == "drop":
            raise e2b.SandboxException("502 Bad Gateway: sandbox not found")
        execution = e2b_ci.Execution()
        for message in SCRIPTS[code]:
            parse_output(execution, json.dumps(message))
        return execution

    def kill(self):
        FakeSandbox.killed.append(self)


@pytest.fixture
def fake():
    FakeSandbox.created, FakeSandbox.killed, FakeSandbox.fail_create = [], [], None
    return FakeSandbox


def tool(**kw) -> PythonTool:
    backend = E2BBackend(sandbox_class=FakeSandbox, api_key="test-key")
    return PythonTool(backend=backend, **kw)


def test_output_and_final_value(fake):
    t = tool()
    s = open_session(t)
    r = call(t, "print('hi')\n1 + 1", s)
    assert r.status == Status.OK and r.text == "hi\n2"
    assert r.text == "hi\n2" and r.metadata["has_value"]
    assert r.metadata["backend"] == "e2b" and r.metadata["execution_count"] == 1
    close_session(t, s)
    assert len(fake.created) == 1 and len(fake.killed) == 1


def test_errors_in_both_styles(fake):
    full, last = tool(), tool(error_style="last_line")
    r = call(full, "1/0")
    assert r.status == Status.ERROR and "\x1b" not in r.text
    assert "Traceback" in r.text and r.text.endswith("ZeroDivisionError: division by zero")
    assert call(last, "1/0").text == "ZeroDivisionError: division by zero"
    r = call(full, "x = bytearray(2**40)")
    assert r.status == Status.KILLED and r.metadata["error_last_line"] == "MemoryError"


def test_stderr_shown_and_output_capped(fake):
    r = call(tool(max_output_chars=100), "warn")
    assert r.text == "careful" and not r.metadata["has_value"]
    r = call(tool(max_output_chars=100), "big")
    assert r.metadata["truncated"] and len(r.text) < 200 and "characters truncated" in r.text


def test_timeout_discards_the_sandbox(fake):
    t = tool(timeout_s=3)
    s = open_session(t)
    r = call(t, "slow", s)
    assert r.status == Status.TIMEOUT and "3 s" in r.text and r.metadata["restarted"]
    assert len(fake.killed) == 1  # E2B would keep running the cell: the sandbox goes
    assert call(t, "print('hi')\n1 + 1", s).status == Status.OK
    assert len(fake.created) == 2 and s.restarts == 1
    close_session(t, s)


def test_service_failures_are_infra_errors(fake):
    t = tool()
    r = call(t, "drop", open_session(t))
    assert r.status == Status.INFRA_ERROR and "not your fault" in r.text
    fake.fail_create = e2b.AuthenticationException("invalid API key")
    r = call(t, "print('hi')\n1 + 1")
    assert r.status == Status.INFRA_ERROR and "invalid API key" in r.text


def test_stateless_mode_uses_a_sandbox_per_call(fake):
    t = tool(stateful=False)
    s = open_session(t)
    for _ in range(3):
        assert call(t, "print('hi')\n1 + 1", s).status == Status.OK
    assert len(fake.created) == 3 and len(fake.killed) == 3


def test_self_hosted_settings_from_the_environment(fake, monkeypatch):
    monkeypatch.setenv("E2B_API_KEY", "env-key")
    monkeypatch.setenv("E2B_DOMAIN", "e2b.internal.example")
    monkeypatch.setenv("E2B_API_URL", "https://api.e2b.internal.example")
    t = PythonTool(backend=E2BBackend(sandbox_class=FakeSandbox, template="math-py"))
    call(t, "print('hi')\n1 + 1")
    kw = fake.created[-1]
    assert kw["api_key"] == "env-key" and kw["domain"] == "e2b.internal.example"
    assert kw["api_url"] == "https://api.e2b.internal.example" and kw["template"] == "math-py"
    assert t.backend.describe()["domain"] == "e2b.internal.example"
    explicit = E2BBackend(sandbox_class=FakeSandbox, domain="other.example")
    assert explicit.create_options["domain"] == "other.example"


def test_usable_from_different_event_loops(fake):
    t = tool()
    s = asyncio.run(t.open_session())
    texts = [asyncio.run(t.call({"code": "print('hi')\n1 + 1"}, s)).text for _ in range(3)]
    assert texts == ["hi\n2"] * 3 and len(fake.created) == 1


def test_e2b_is_selectable_by_name(fake):
    t = PythonTool(backend="e2b", sandbox_class=FakeSandbox)
    assert isinstance(t.backend, E2BBackend)


@pytest.mark.live
@pytest.mark.skipif(not os.environ.get("E2B_API_KEY"), reason="E2B_API_KEY is not set")
def test_live_e2b():
    t = PythonTool(backend="e2b", timeout_s=30)
    s = open_session(t)
    try:
        assert call(t, "x = 21", s).status == Status.OK
        r = call(t, "print('twice'); x * 2", s)
        assert r.status == Status.OK and r.text == "twice\n42"
        r = call(t, "1/0", s)
        assert r.status == Status.ERROR and r.metadata["error_last_line"].startswith(
            "ZeroDivisionError")
    finally:
        close_session(t, s)
        t.close()
