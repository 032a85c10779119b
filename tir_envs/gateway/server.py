"""``Gateway``: the HTTP server, its routes, and the guards in front of every episode.

Routes: ``HEAD|GET /`` (liveness), ``GET /v1/models``, ``POST /v1/chat/completions``,
``POST /v1/responses``, ``POST /v1/messages`` (``?beta=true`` too) and
``/v1/messages/count_tokens``; each also under ``/e/{key}/`` for clients that can only be given
a base URL.  Guards, in order, before any work: the access policy every tir-envs server shares
(``tir_envs.access``: an ``Origin`` not allowed, a web page driving a local server, is
403; on loopback a ``Host`` naming another machine, DNS rebinding, is 403; a declared body over
``max_body_bytes`` is 413); then the episode key (``Authorization: Bearer``, ``x-api-key`` or
the path: the gateway's token is per episode) unknown is 401, ended is 410; a body that grows
past the cap 413, malformed JSON 400, an unknown model 404.  Keys are 32 random bytes
(``secrets``), so an episode cannot be found, read or written by another.  The server binds
127.0.0.1 unless told otherwise.

Open episodes are bounded (``max_episodes``: opening one more is ``GatewayFull``, HTTP 503 on
the admin route) and an episode nobody calls for ``idle_timeout_s`` **expires**: it is ended,
its ledger kept as far as it got with every segment flagged ``infra_failed`` (kind
``timeout``, so trainers drop it) and handed to the ``on_finish`` hooks; ``finish(key)``
returns it to the host.  A call in flight is never idle.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any, Awaitable, Callable

from aiohttp import web

from tir_envs.codec import Codec
from tir_envs.gateway.conversation import BadRequest
from tir_envs.gateway.episode import (SIDE_SEGMENTS, Engine, GatewayEpisode, EpisodeResult,
                                      sampling_for)
from tir_envs.gateway.rewards import HostReward
from tir_envs.rollout.policy import PolicyError, SamplingParams
from tir_envs.access import Access, GuardConfig, Refusal, offered_tokens
from tir_envs.trajectory import EpisodeFailure

Handler = Callable[["Gateway", GatewayEpisode, dict, web.Request],
                   Awaitable[web.StreamResponse]]

MAX_BODY_BYTES = 8 * 1024 * 1024
#: open episodes one gateway holds at most (the field's bar for env servers: 4,000-65,000)
MAX_EPISODES = 65_536
#: seconds without a call after which an episode expires (an agent that died or was dropped)
IDLE_TIMEOUT_S = 900.0
ENDED_KEPT_PER_EPISODE = 4


class GatewayFull(RuntimeError):
    """``open_episode`` on a gateway holding ``max_episodes`` open episodes."""


class Gateway:
    """An OpenAI- and Anthropic-compatible server over one policy (see the package docstring).

    ``async with Gateway(policy, tokenizer=tok) as gw:`` starts it on ``host:port`` (port 0: a
    free one); ``gw.open_episode(task)`` gives ``(base_url, api_key)`` for one agent run and
    ``await gw.finish(api_key)`` its ``EpisodeResult``.  ``side_segments``: ``skip`` (default)
    leaves the segments of side conversations (a harness's title call) out of the result's
    trainable ``trajectories``, ``train`` keeps them (docs/gateway.md).
    """

    def __init__(self, policy: Any, *, tokenizer: Any = None, renderer: Any = None,
                 thinking: str | None = None, sampling: SamplingParams | None = None,
                 model: str = "tir-policy", aliases: tuple[str, ...] = (),
                 reward: Any = None, protocol: Any = None, host: str = "127.0.0.1",
                 port: int = 0,
                 max_body_bytes: int = MAX_BODY_BYTES,
                 allowed_origins: tuple[str, ...] = (), render: Any = None,
                 admin_token: str | None = None, side_segments: str = "skip",
                 max_episodes: int = MAX_EPISODES, idle_timeout_s: float | None = IDLE_TIMEOUT_S,
                 keep_expired: bool = True):
        from tir_envs.chat.registry import resolve_renderer
        from tir_envs.gateway.render import serving_render
        from tir_envs.tokenizer import load_tokenizer

        tok = load_tokenizer(tokenizer if tokenizer is not None
                             else getattr(policy, "tokenizer", None))
        chat = resolve_renderer(tok, Codec(tok), renderer, thinking)
        if side_segments not in SIDE_SEGMENTS:
            raise ValueError(f"side_segments must be one of {list(SIDE_SEGMENTS)}, got "
                             f"{side_segments!r}")
        self.engine = Engine(policy, chat, render or serving_render(chat),
                             sampling_for(sampling or SamplingParams(), chat), tok,
                             side_segments)
        self.models = (model, *aliases)
        self.reward = HostReward(reward, protocol)
        self.host, self.port = host, port
        self.max_body_bytes = max_body_bytes
        # the token is per episode (checked by the routes), so the shared policy's server token
        # is off; Origin, Host and size are the shared rules
        self.access = Access(GuardConfig(host=host, port=port, token="per-episode",
                                         allow_origins=tuple(allowed_origins),
                                         max_body_bytes=max_body_bytes), server_token=False)
        _check_limits(max_episodes, idle_timeout_s)
        self.max_episodes, self.idle_timeout_s = max_episodes, idle_timeout_s
        self.episodes: dict[str, GatewayEpisode] = {}
        #: keys of ended episodes (a call on one is 410, not 401), the newest
        #: ``ENDED_KEPT_PER_EPISODE * max_episodes``: a long run's memory stays bounded
        self.ended: dict[str, None] = {}
        #: expired episodes' results, until ``finish(key)`` hands them to the host
        #: (``keep_expired=False``: only the ``on_finish`` hooks get them)
        self.expired: dict[str, EpisodeResult] = {}
        self.keep_expired = keep_expired
        self._reaper: Any = None
        #: opens and finishes episodes over HTTP (``POST /gateway/episodes``, ``.../finish``)
        #: for a gateway run as its own process; ``None``: the Python API only
        self.admin_token = admin_token
        self.on_finish: list[Any] = []
        self._runner: web.AppRunner | None = None
        self.url = ""

    # -- life cycle ---------------------------------------------------------------
    async def start(self) -> "Gateway":
        app = web.Application(client_max_size=self.max_body_bytes,
                              middlewares=[self._guard])
        self._routes(app)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=4096)
        await site.start()
        self.port = self._runner.addresses[0][1]  # the bound port when port=0
        self.access.port = self.port
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{host}:{self.port}"
        if self.idle_timeout_s is not None:
            import asyncio
            self._reaper = asyncio.ensure_future(self._reap())
        return self

    async def aclose(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> "Gateway":
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    # -- episodes -----------------------------------------------------------------
    def open_episode(self, task: Any = None, task_id: str = "") -> tuple[str, str]:
        """``(base_url, api_key)`` for one agent run on ``task``.  ``base_url`` ends in
        ``/v1`` (what OpenAI clients take); Anthropic clients take it without ``/v1``."""
        if len(self.episodes) >= self.max_episodes:
            raise GatewayFull(f"the gateway holds max_episodes={self.max_episodes} open "
                              "episodes: finish some (finish(key)) or start it with a larger "
                              "max_episodes")
        key = "tir-" + secrets.token_urlsafe(32)
        tid = task_id or str(getattr(task, "id", "") or (task.get("id", "") if isinstance(
            task, dict) else ""))
        self.episodes[key] = GatewayEpisode(key, task, self.engine, tid)
        return f"{self.url}/v1", key

    def episode(self, key: str) -> GatewayEpisode:
        ep = self.episodes.get(key)
        if ep is None:
            if key in self.expired:
                raise BadRequest(f"this episode expired (no call for {self.idle_timeout_s} "
                                 "s); open a new one", 410, "episode_expired")
            if key in self.ended:
                raise BadRequest("this episode has ended; open a new one", 410,
                                 "episode_ended")
            raise BadRequest("unknown episode key: pass the api_key open_episode() gave "
                             "(Authorization: Bearer KEY or x-api-key: KEY)", 401,
                             "invalid_api_key")
        return ep

    async def finish(self, key: str, agent_answer: Any = None,
                     error: str | None = None) -> EpisodeResult:
        """End the episode: no more calls on its key; its reward from the host side.  An
        expired episode's result (flagged, no reward) is returned once."""
        if key in self.expired:
            result = self.expired.pop(key)
            result.agent_answer = agent_answer
            return result
        ep = self.episode(key)
        async with ep.lock:
            ep.ended = True
        del self.episodes[key]
        self._ended(key)
        reward = None if error else await self.reward.score(ep)
        result = ep.result(reward, agent_answer, error)
        for traj in result.trajectories:
            self.reward.credit(traj, reward)
        for hook in self.on_finish:
            hook(result)
        return result

    def _ended(self, key: str) -> None:
        self.ended[key] = None
        if len(self.ended) > ENDED_KEPT_PER_EPISODE * self.max_episodes:
            del self.ended[next(iter(self.ended))]

    # -- expiry ---------------------------------------------------------------------
    def expire_idle(self, now: float | None = None) -> list[EpisodeResult]:
        """End every episode with no call in flight and none for ``idle_timeout_s``."""
        if self.idle_timeout_s is None:
            return []
        now = time.monotonic() if now is None else now
        stale = [k for k, ep in self.episodes.items()
                 if not ep.busy and now - ep.touched >= self.idle_timeout_s]
        return [self._expire(key, now) for key in stale]

    def _expire(self, key: str, now: float) -> EpisodeResult:
        ep = self.episodes.pop(key)
        ep.ended = True
        self._ended(key)
        message = (f"the episode expired: no call for {now - ep.touched:.0f} s "
                   f"(idle_timeout_s={self.idle_timeout_s})")
        result = ep.result(None, None, message)
        result.metadata["expired"] = True
        failure = EpisodeFailure("timeout", message)
        for traj in result.trajectories:
            traj.fail(failure)
            traj.metadata["gateway"]["expired"] = True
        if self.keep_expired:
            while len(self.expired) >= self.max_episodes:  # unclaimed: the oldest go first
                self.expired.pop(next(iter(self.expired)))
            self.expired[key] = result
        for hook in self.on_finish:
            hook(result)
        return result

    async def _reap(self) -> None:
        import asyncio
        assert self.idle_timeout_s is not None
        while True:
            await asyncio.sleep(min(max(self.idle_timeout_s / 4, 0.05), 30.0))
            self.expire_idle()

    def stats(self) -> dict[str, Any]:
        """What a pool's host reads of a worker: its CPU time, open and expired episodes."""
        return {"cpu_s": time.process_time(), "open": len(self.episodes),
                "expired": len(self.expired), "ended": len(self.ended)}

    def _admin(self, request: web.Request) -> None:
        given = request.headers.get("Authorization", "")[7:].strip()
        if not secrets.compare_digest(given.encode(), (self.admin_token or "").encode()):
            raise BadRequest("the gateway's admin token is required (Authorization: Bearer "
                             "ADMIN_TOKEN, printed at start)", 401, "invalid_api_key")

    async def _admin_open(self, request: web.Request) -> web.Response:
        self._admin(request)
        body = await read_json(request, self.access) if request.can_read_body else {}
        try:
            base_url, key = self.open_episode(body.get("task"), str(body.get("task_id") or ""))
        except GatewayFull as exc:
            raise BadRequest(str(exc), 503, "gateway_full") from None
        return web.json_response({"base_url": base_url, "api_key": key})

    async def _admin_stats(self, request: web.Request) -> web.Response:
        self._admin(request)
        return web.json_response(self.stats())

    async def _admin_finish(self, request: web.Request) -> web.Response:
        self._admin(request)
        body = await read_json(request, self.access)
        result = await self.finish(str(body.get("api_key") or ""), body.get("answer"))
        return web.json_response(summary(result))

    # -- HTTP ---------------------------------------------------------------------
    def _routes(self, app: web.Application) -> None:
        from tir_envs.gateway import anthropic_messages, chat_completions, responses

        app.router.add_get("/", _alive)
        posts: dict[str, Handler] = {
            "/v1/chat/completions": chat_completions.handle,
            "/v1/responses": responses.handle,
            "/v1/messages": anthropic_messages.handle,
            "/v1/messages/count_tokens": anthropic_messages.count_tokens,
        }
        if self.admin_token:
            app.router.add_post("/gateway/episodes", self._admin_open)
            app.router.add_post("/gateway/episodes/finish", self._admin_finish)
            app.router.add_get("/gateway/stats", self._admin_stats)
        for prefix in ("", "/e/{key}"):
            app.router.add_get(prefix + "/v1/models", self._models)
            for path, handler in posts.items():
                app.router.add_post(prefix + path, self._post(handler))

    @web.middleware
    async def _guard(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """The aiohttp adapter of ``tir_envs.access`` (the routes check the keys)."""
        refusal = self.access.refusal(request.path, request.headers, request.query_string) \
            or self.access.length_refusal(request.headers.get("Content-Length"))
        if refusal is not None:
            return error_response(request, refusal.status, refusal.message, refusal.code)
        try:
            return await handler(request)
        except BadRequest as exc:
            return error_response(request, exc.status, str(exc), exc.code)
        except PolicyError as exc:  # the backend's failure, not the client's: 502
            return error_response(request, 502, f"the policy failed: {exc}", "policy_error")

    async def _models(self, request: web.Request) -> web.Response:
        self.episode(request_key(request))
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "tir-envs",
                 "type": "model", "display_name": m} for m in self.models]
        return web.json_response({"object": "list", "data": data, "has_more": False,
                                  "first_id": data[0]["id"], "last_id": data[-1]["id"]})

    def _post(self, handler: Handler) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def route(request: web.Request) -> web.StreamResponse:
            episode = self.episode(request_key(request))
            body = await read_json(request, self.access)
            model = body.get("model")
            if model not in self.models:
                raise BadRequest(f"unknown model {model!r}: this gateway serves "
                                 f"{', '.join(self.models)}", 404, "model_not_found")
            return await handler(self, episode, body, request)
        return route


def summary(result: EpisodeResult) -> dict[str, Any]:
    """An episode's result as JSON (the trajectories in full)."""
    return {"episode": result.key_id, "reward": result.reward, "calls": result.calls,
            "breaks": result.breaks, "forks": [f.to_dict() for f in result.forks],
            "tool_calls": result.tool_calls, "client_tools": result.client_tools,
            "overrides": result.overrides, "answer": result.answer, "error": result.error,
            "conversation": result.conversation, "metadata": result.metadata,
            "trajectories": [t.to_dict() for t in result.trajectories],
            "side_trajectories": [t.to_dict() for t in result.side_trajectories]}


def request_key(request: web.Request) -> str:
    key = request.match_info.get("key")
    if key:
        return key
    offered = offered_tokens(request.headers)  # Bearer, x-api-key: where the policy reads them
    if not offered:
        raise BadRequest("no episode key: send Authorization: Bearer KEY or x-api-key: KEY "
                         "(the api_key open_episode() gave)", 401, "invalid_api_key")
    return offered[0]


async def read_json(request: web.Request, access: Access) -> dict[str, Any]:
    try:
        raw = await request.read()  # aiohttp stops reading at client_max_size
    except web.HTTPRequestEntityTooLarge:
        refusal = access.size_refusal(access.config.max_body_bytes + 1)
        assert isinstance(refusal, Refusal)
        raise BadRequest(refusal.message, refusal.status, refusal.code) from None
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadRequest(f"the body is not JSON ({exc}); send a JSON object") from None
    if not isinstance(body, dict):
        raise BadRequest(f"the body must be a JSON object, got {type(body).__name__}")
    return body


def _check_limits(max_episodes: Any, idle_timeout_s: Any) -> None:
    if isinstance(max_episodes, bool) or not isinstance(max_episodes, int) or max_episodes < 1:
        raise ValueError(f"max_episodes must be an int >= 1, got {max_episodes!r}")
    if idle_timeout_s is not None and (isinstance(idle_timeout_s, bool) or not isinstance(
            idle_timeout_s, (int, float)) or not idle_timeout_s > 0):
        raise ValueError(f"idle_timeout_s must be a number of seconds > 0 (or None: never "
                         f"expire), got {idle_timeout_s!r}")


def error_response(request: web.Request, status: int, message: str, code: str) -> web.Response:
    """An error in the shape the calling API's clients read (Anthropic's or OpenAI's)."""
    if "/messages" in request.path:
        kind = {401: "authentication_error", 403: "permission_error", 404: "not_found_error",
                413: "request_too_large", 502: "api_error",
                503: "overloaded_error"}.get(status, "invalid_request_error")
        body = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        body = {"error": {"message": message, "type": code, "code": code, "param": None}}
    return web.json_response(body, status=status)


async def _alive(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})
