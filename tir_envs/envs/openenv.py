"""``tir/OpenEnv-v0``: any OpenEnv environment, played by a tool-calling policy, token-exact.

::

    env = tir_envs.make("tir/OpenEnv-v0", url="http://127.0.0.1:8000")     # a running server
    env = tir_envs.make("tir/OpenEnv-v0", app="my_env.server:app")        # or start it here

The OpenEnv env's action schema (its ``/schema``) becomes one tool, ``step``: the policy acts by
calling it (``<tool_call>{"name": "step", "arguments": {<action fields>}}</tool_call>``,
``tir_envs.protocols.tool_use``), the call goes over OpenEnv's WebSocket protocol, and the
observation comes back as the tool's result (JSON text), appended to the ledger as env tokens
(loss mask 0).  The first observation (the remote ``reset``) ends the prompt.  The remote
reward of each step is that turn's reward; the remote ``done`` ends the episode.

Statuses are host-observed: the remote env rejecting or failing on the action (OpenEnv's
``VALIDATION_ERROR``/``EXECUTION_ERROR`` codes) is ``error``; no answer within
``timeout_s`` is ``timeout``; a lost connection, or the server out of capacity
(``CAPACITY_REACHED``, ``FACTORY_ERROR``, ``SESSION_ERROR``), is ``infra_error`` and the
trajectory is flagged.  Nothing an observation says changes a status.

Everything the remote env writes is a third party's text: its observations (the first one, in
the prompt, included), its action schema and its ``/metadata`` are escaped
(``tir_envs.untrusted``) before the policy reads them, as every tool result is.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.parse
import urllib.request
from typing import Any, Mapping

from tir_envs.env import TIREnv, reject_wiring
from tir_envs.protocols.tool_use import ToolUseProtocol
from tir_envs.rewards.base import RewardResult
from tir_envs.sync_bridge import needs_loop
from tir_envs.task import Task
from tir_envs.tools.base import Tool, ToolResult, Status
from tir_envs.tools.function import cap
from tir_envs.tools.loop_thread import LoopThread
from tir_envs.trajectory import Turn
from tir_envs.untrusted import escape_schema, escape_third_party

INSTRUCTIONS = ("You act in an environment. Take actions by calling the step tool; each call "
                "returns the environment's observation. Continue until the environment says "
                "the episode is done.")
#: OpenEnv error codes that are the server's trouble, not the action's
INFRA_CODES = {"CAPACITY_REACHED", "FACTORY_ERROR", "SESSION_ERROR"}
MAX_OBSERVATION_CHARS = 16_000
_THREAD: LoopThread | None = None


def _loop_thread() -> LoopThread:
    """One loop thread for every OpenEnv connection of this process."""
    global _THREAD
    if _THREAD is None or not _THREAD.alive:
        _THREAD = LoopThread("openenv-clients")
    return _THREAD


class RemoteError(Exception):
    """An OpenEnv error response, with its code (read from the structure, not the text)."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{message} ({code})")
        self.code, self.message = code, message


#: the private methods of the pinned ``openenv-core`` (``>=0.3,<0.4``) the client overrides:
#: its public ``reset``/``step`` raise a bare ``RuntimeError`` with the error code only in the
#: message text, so the code is read from the response's structure by overriding
#: ``_send_and_receive`` (built on ``_send`` and ``_receive``).  ``tests/test_private_apis.py``
#: checks them against the installed version.
PRIVATE_CLIENT_API = ("_send_and_receive", "_send", "_receive")


def _client_class():
    from openenv.core import GenericEnvClient

    missing = [name for name in PRIVATE_CLIENT_API if not hasattr(GenericEnvClient, name)]
    if missing:
        from tir_envs.validation import private_api_moved
        raise ImportError(private_api_moved("openenv", f"EnvClient.{', '.join(missing)}",
                                            "reading an OpenEnv error's code"))

    class Client(GenericEnvClient):
        """OpenEnv's generic client, raising ``RemoteError`` with the response's code."""

        async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
            await self._send(message)
            response = await self._receive()
            if response.get("type") == "error":
                data = response.get("data") or {}
                raise RemoteError(str(data.get("code", "UNKNOWN")),
                                  str(data.get("message", "")))
            return response
    return Client


class Remote:
    """The env's connection to its OpenEnv server (one WebSocket session, on the shared loop
    thread); dropped after a failure and reopened at the next reset."""

    def __init__(self, base_url: str, timeout_s: float, connect_timeout_s: float,
                 token: str | None = None):
        self.base_url, self.timeout_s = base_url, timeout_s
        self._ws_base = _with_token(base_url, token)
        self.connect_timeout_s = connect_timeout_s
        self._client: Any = None
        self.broken: str | None = None

    async def reset(self, **kwargs: Any) -> Any:
        await self.drop()
        thread = _loop_thread()
        self._client = _client_class()(base_url=self._ws_base,
                                       connect_timeout_s=self.connect_timeout_s,
                                       message_timeout_s=self.timeout_s)
        self.broken = None
        return await thread.submit(self._client.reset(**kwargs), self.timeout_s +
                                   self.connect_timeout_s)

    async def step(self, action: dict[str, Any]) -> ToolResult:
        if self._client is None or self.broken:
            return ToolResult.infra(self.broken or "the environment is not connected",
                                    server=self.base_url)
        try:
            result = await _loop_thread().submit(self._client.step(action), self.timeout_s)
        except RemoteError as exc:
            if exc.code in INFRA_CODES:
                self.broken = f"the environment server failed ({exc.code})"
                return ToolResult.infra(self.broken, code=exc.code)
            return ToolResult(cap(f"Error: the environment rejected the action: {exc.message}",
                                  MAX_OBSERVATION_CHARS), Status.ERROR,
                              metadata={"code": exc.code})
        except asyncio.TimeoutError:
            self.broken = "the environment did not answer an earlier action in time"
            await self.drop()
            return ToolResult(f"Error: the environment did not answer within "
                              f"{self.timeout_s:g} s", Status.TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - transport: the host's failure
            self.broken = f"the environment connection failed ({type(exc).__name__})"
            await self.drop()
            return ToolResult.infra(self.broken, server=self.base_url)
        text = json.dumps(result.observation, ensure_ascii=False, default=str)
        reward = None if result.reward is None else float(result.reward)
        return ToolResult(cap(text, MAX_OBSERVATION_CHARS),
                          metadata={"openenv_reward": reward, "openenv_done": bool(result.done)})

    async def drop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                await _loop_thread().submit(client.disconnect(), 5)
            except Exception:  # noqa: BLE001 - closing must always finish
                pass


class StepTool(Tool):
    """The OpenEnv env's ``step``, as a tool whose arguments are the action's fields."""

    name = "step"

    def __init__(self, remote: Remote, action_schema: dict[str, Any], description: str):
        self.remote = remote
        params = {k: v for k, v in action_schema.items() if k not in ("title", "$defs")}
        params.setdefault("type", "object")
        params.get("properties", {}).pop("metadata", None)  # OpenEnv's, not the policy's
        self.schema = {"type": "function", "function": {
            "name": self.name, "description": description, "parameters": params}}

    async def call(self, arguments: dict[str, Any], session: Any = None) -> ToolResult:
        if "metadata" in arguments:  # OpenEnv's own field: a remote env may trust what it says
            return ToolResult("Error: 'metadata' is OpenEnv's field, not an action argument; "
                              "call step with the action's fields only", Status.ERROR)
        return await self.remote.step(arguments)


class OpenEnvEnv(TIREnv):
    """An OpenEnv environment as a tir env (see the module docstring).

    ``url``: the server's base URL; or ``app``: an ASGI app (or ``"module:attr"``) this env
    starts on a free local port and stops at ``close``.  ``tasks``: optional questions shown
    before the first observation (default: one generic task).  ``timeout_s``: seconds per
    remote step; ``instructions``: the system prompt's first paragraph.  ``token``: the
    server's token (default ``$TIR_ENVS_TOKEN``), for a server that requires one.
    """

    env_id = "tir/OpenEnv-v0"

    def __init__(self, url: str | None = None, app: Any = None, tasks: Any = None,
                 tokenizer: Any = None, timeout_s: float = 60.0,
                 connect_timeout_s: float = 10.0, instructions: str = INSTRUCTIONS,
                 token: str | None = None, **kwargs: Any):
        reject_wiring(kwargs, "OpenEnvEnv", "Its one tool is the remote env's step.")
        if (url is None) == (app is None):
            raise ValueError("tir/OpenEnv-v0 needs url=... (a running OpenEnv server) or "
                             "app=... (an ASGI app or 'module:attr' to start here), not both")
        self._local = None
        if app is not None:
            from tir_envs.envs.openenv_local import serve
            self._local = serve(app)
            url = self._local.url
        self.base_url = url.rstrip("/").replace("ws://", "http://", 1).replace(
            "wss://", "https://", 1)
        token = token or os.environ.get("TIR_ENVS_TOKEN") or None
        schema, description = _describe_remote(self.base_url, connect_timeout_s, token)
        self.remote = Remote(self.base_url, timeout_s, connect_timeout_s, token)
        tool = StepTool(self.remote, schema, description)
        self.first_observation: Any = None
        super().__init__(tokenizer=tokenizer,
                         tasks=tasks if tasks is not None else [
                             {"question": "Act in the environment until it is done."}],
                         protocol=ToolUseProtocol([tool.schema], instructions),
                         tools=[tool], **kwargs)

    async def aon_reset(self, task: Task) -> None:
        await needs_loop()
        try:
            result = await self.remote.reset()
        except Exception as exc:  # noqa: BLE001 - one clear error for every way it fails
            raise ConnectionError(f"the OpenEnv server at {self.base_url} did not reset: "
                                  f"{type(exc).__name__}: {exc}") from exc
        self.first_observation = result.observation

    def build_prompt(self, task: Task) -> str:
        shown = escape_third_party(cap(json.dumps(self.first_observation, ensure_ascii=False,
                                                  default=str), MAX_OBSERVATION_CHARS),
                                   self.tokenizer)
        question = f"{task.question}\n\nThe environment's first observation:\n{shown}"
        return super().build_prompt(Task(task.id, question, task.answer, task.meta))

    def turn_reward(self, turn: Turn, results: list[ToolResult]) -> RewardResult | None:
        rewards = [r.metadata.get("openenv_reward") for r in results]
        if all(x is None for x in rewards):
            return None
        value = float(sum(x for x in rewards if x is not None))
        return RewardResult(value, {"openenv": value})

    def tools_ended(self, results: list[ToolResult]) -> bool:
        return any(r.metadata.get("openenv_done") for r in results)

    def on_close(self) -> None:
        try:
            _loop_thread().run(self.remote.drop(), 10)
        except Exception:  # noqa: BLE001 - closing must always finish
            pass
        if self._local is not None:
            from tir_envs.envs.openenv_local import release
            release(self._local)
            self._local = None


def _describe_remote(base_url: str, timeout_s: float,
                     token: str | None = None) -> tuple[dict[str, Any], str]:
    """The remote env's action schema and a description, from ``/schema`` and ``/metadata``."""
    try:
        schema = _get_json(f"{base_url}/schema", timeout_s, token)
    except Exception as exc:  # noqa: BLE001 - one clear error for every way it fails
        raise ConnectionError(f"cannot read {base_url}/schema (is an OpenEnv server running "
                              f"there?): {type(exc).__name__}: {exc}") from exc
    try:
        meta: Mapping[str, Any] = _get_json(f"{base_url}/metadata", timeout_s, token)
    except Exception:  # noqa: BLE001 - metadata is optional
        meta = {}
    if not isinstance(meta, Mapping):
        meta = {}
    name = escape_third_party(str(meta.get("name", "remote"))[:200])
    about = escape_third_party(str(meta.get("description", ""))[:2000])
    description = (f"Take one action in the {name} environment and get its observation. "
                   f"{about}").strip()
    action = schema.get("action", {}) if isinstance(schema, Mapping) else {}
    return escape_schema(action), description


def _get_json(url: str, timeout_s: float, token: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 - http(s)
        return json.loads(response.read())


def _with_token(base_url: str, token: str | None) -> str:
    """``base_url`` with ``tir:TOKEN@`` before the host: OpenEnv's client cannot set headers,
    and its WebSocket library sends a URL's user info as ``Basic`` auth (which
    ``tir_envs.serving.guard`` accepts)."""
    if not token:
        return base_url
    scheme, sep, rest = base_url.partition("://")
    return f"{scheme}{sep}tir:{urllib.parse.quote(token, safe='')}@{rest}"
