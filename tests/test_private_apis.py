"""The private APIs of pinned dependencies that tir-envs leans on are still where it reads them.

The SDKs offer no public way to do two things we need: ``mcp`` (the server side of ``tir-envs
serve mcp``) gives a tool's ``Context`` no handle on its connection, which keys one tool
session per MCP connection; ``openenv-core``'s client raises a bare ``RuntimeError`` for an
error response, with its code only in the text, which ``tir/OpenEnv-v0`` reads from the
response's structure instead.  Each test fails with a message that names the private API, the
installed version and what breaks, so an upgrade that moves one is caught here, not as a
silently lost interpreter state or a rejected action counted as an infrastructure failure.
"""

from __future__ import annotations

import inspect
from importlib.metadata import version

import pytest


def _moved(package: str, name: str, breaks: str) -> str:
    return (f"{package} {version(package)} moved the private {name}: {breaks}. Update the code "
            "named in this test's docstring, or pin the previous version in pyproject.toml")


def test_mcp_server_session_keeps_its_connection():
    pytest.importorskip("mcp", reason="the mcp extra is part of make test")
    from mcp.server.session import ServerSession

    source = inspect.getsource(ServerSession.__init__)
    assert "self._connection = connection" in source, _moved(
        "mcp", "ServerSession._connection",
        "tir_envs.serving.mcp_server.connection_of cannot key a tool session per connection")


def test_mcp_connection_of_refuses_a_session_without_connection():
    from tir_envs.serving.mcp_server import connection_of

    class Session:  # what a release without ``_connection`` would hand a tool
        pass

    class Ctx:
        session = Session()

    with pytest.raises(RuntimeError, match=r"mcp .* no longer has ServerSession._connection"):
        connection_of(Ctx())


def test_openenv_client_private_methods_are_there():
    pytest.importorskip("openenv", reason="the openenv extra is part of make test")
    from openenv.core import GenericEnvClient
    from openenv.core.env_client import EnvClient

    from tir_envs.envs.openenv import PRIVATE_CLIENT_API

    for name in PRIVATE_CLIENT_API:
        assert hasattr(GenericEnvClient, name), _moved(
            "openenv-core", f"EnvClient.{name}",
            "tir_envs.envs.openenv cannot read an error response's code")
    for public in ("reset", "step"):
        assert "self._send_and_receive(" in inspect.getsource(getattr(EnvClient, public)), \
            _moved("openenv-core", f"the route of EnvClient.{public} through "
                   "_send_and_receive", "an error response would bypass RemoteError")
    body = inspect.getsource(EnvClient._send_and_receive)
    assert "self._send(" in body and "self._receive(" in body, _moved(
        "openenv-core", "EnvClient._send/_receive", "the override cannot send or receive")


def test_openenv_error_codes_still_reach_the_status():
    """Behaviour, not source: a rejected action is ``tool_error`` with the server's code, so
    the override is still on the path a real error response takes."""
    pytest.importorskip("openenv", reason="the openenv extra is part of make test")
    from tests.openenv_helpers import guess_app
    from tir_envs.envs.openenv import OpenEnvEnv

    env = OpenEnvEnv(app=guess_app(), timeout_s=10)
    try:
        env.reset()
        *_, info = env.step('<tool_call>{"name": "step", "arguments": {"guess": "seven"}}'
                            '</tool_call>')
        call = info["turn"].tool_results[0]
        assert info["turn"].status == "tool_error", _moved(
            "openenv-core", "error path of EnvClient", "a rejected action is no longer read "
            "by its code")
        assert call.get("code") == "VALIDATION_ERROR", call
    finally:
        env.close()
