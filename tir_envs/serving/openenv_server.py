"""Any registered env as an OpenEnv server: ``tir-envs serve openenv ENV_ID [--env-arg k=v]``.

OpenEnv's own server (``openenv.core.env_server.create_fastapi_app``) does the transport: HTTP
(``/reset``, ``/step``, ``/schema``, ``/metadata``, ``/health``) and the WebSocket ``/ws``, one
env per WebSocket session, up to ``max_sessions`` at once.  This module adapts the env:

* ``TokenAction``: ``tokens`` (the ids the policy generated, with optional ``logprobs``), or
  ``text`` (retokenized; the trajectory then says so and counts the drift);
* ``TokenObservation``: the ids to append (``tokens``: the prompt at reset, the env's tokens
  after a step) and, since OpenEnv drops ``metadata`` on the wire, everything a trainer needs
  in typed fields: the ledger so far (``ledger_token_ids``/``ledger_loss_mask``), the stop
  strings and stop token ids, the token budget, the turn's status and the outcome;
* ``/metadata`` pins the tokenizer (name, vocabulary size, sha256 of the vocabulary, end of
  sequence): a client whose tokenizer differs must not send ids to this server.

The env's async twins run on the server's event loop (``reset_async``/``step_async``), so
concurrent sessions never wait on each other's tool calls.  What would hold that loop runs
beside it: a session's env is built on a worker thread at its first reset (at most
``BUILDS_AT_ONCE`` at a time; ``/metadata`` and ``/state`` never build one), ended
sessions' envs are kept for the next ones (``EnvPool``), a text action longer than
``TEXT_CHARS_PER_TOKEN`` characters per token left is refused before it is tokenized, and
one that fits is tokenized (and its drift measured) on a worker thread, at most
``TEXTS_AT_ONCE`` (half the cores) at a time, while the loop serves the other sessions
(the tokenizer lets go of the GIL for long texts: ``Codec.encode``).  ``tir-envs serve
openenv`` puts ``tir_envs.serving.guard`` in front (token, Origin allow-list, size caps) and
ends sessions idle for ``--idle-s``.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import uuid
from typing import Any, Callable, Optional

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import Field

from tir_envs.tools.slots import Slots

#: envs built at once by one server (building loads a tokenizer, a dataset, tools)
BUILDS_AT_ONCE = 2
#: characters a text action may have per token left in the episode's budget (no token of any
#: vocabulary is longer), so a 12 MB text is refused before it is tokenized
TEXT_CHARS_PER_TOKEN = 32
#: text actions tokenized at once by one server (each on a worker thread, the GIL let go):
#: half the cores, so the loop always has one (two flooding clients on two cores would
#: otherwise take both)
TEXTS_AT_ONCE = max(1, (os.cpu_count() or 2) // 2)
#: characters of text plus ids of ledger from which tokenizing a text action is heavy work
#: (done off the loop); below, it costs well under a millisecond
HEAVY_FROM = 4096
_BUILDS = threading.BoundedSemaphore(BUILDS_AT_ONCE)
_TEXTS = Slots(TEXTS_AT_ONCE)


class TokenAction(Action):
    """One turn of the policy: token ids (preferred) or text."""

    tokens: list[int] = Field(default_factory=list, description="ids the policy generated")
    logprobs: Optional[list[float]] = Field(default=None, description="their log-probabilities")
    text: Optional[str] = Field(default=None, description="a text action (retokenized)")


class TokenObservation(Observation):
    """What the env returns, token-exact (see the module docstring)."""

    tokens: list[int] = Field(default_factory=list, description="ids to append: the prompt at "
                              "reset, the env's tokens (loss mask 0) after a step")
    text: str = Field(default="", description="those ids decoded (for reading, not training)")
    prompt_ids: list[int] = Field(default_factory=list)
    ledger_token_ids: list[int] = Field(default_factory=list,
                                        description="every id after the prompt so far")
    ledger_loss_mask: list[int] = Field(default_factory=list,
                                        description="1 for policy ids, 0 for env ids")
    stop_sequences: list[str] = Field(default_factory=list)
    stop_token_ids: list[int] = Field(default_factory=list)
    max_new_tokens: int = 0
    turn_status: str = ""
    truncated: bool = False
    infra_failed: bool = False
    correct: Optional[bool] = None
    reward_components: dict[str, float] = Field(default_factory=dict)
    stop_reason: str = Field(default="", description="why the episode ended (at the end)")
    answer: Optional[str] = Field(default=None, description="the policy's final answer as the "
                                  "protocol read it, what was graded (at the end)")
    task_id: str = ""


class TIRState(State):
    """The session's episode: env id, task id, turns so far."""

    env_id: str = ""
    task_id: str = ""
    turns: int = 0


class TIREnvironment(Environment):
    """One tir env behind OpenEnv's ``Environment`` interface (one per session)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, make_env: Callable[[], Any], env_id: str, pin: dict[str, Any],
                 release: Callable[[Any], None] | None = None):
        super().__init__()
        self._make_env, self._release = make_env, release
        self.env: Any = None  # built at the first reset, off the loop (see the module)
        self.env_id, self.pin = env_id, pin
        self._state = TIRState(env_id=env_id)
        self._stop_ids: list[int] = []

    async def _ensure_env(self) -> Any:
        if self.env is None:
            self.env = await asyncio.to_thread(self._build)
            self._stop_ids = stop_token_ids(self.env)
        return self.env

    def _build(self) -> Any:
        with _BUILDS:
            return self._make_env().unwrapped

    # OpenEnv calls these when the server has no running loop to offer; ours always has one
    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
              **kwargs: Any) -> TokenObservation:
        return _run(self.reset_async(seed, episode_id, **kwargs))

    def step(self, action: TokenAction, timeout_s: Optional[float] = None,
             **kwargs: Any) -> TokenObservation:
        return _run(self.step_async(action, timeout_s, **kwargs))

    async def reset_async(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
                          index: Optional[int] = None, **kwargs: Any) -> TokenObservation:
        options = {"index": index} if index is not None else None
        await self._ensure_env()
        obs, info = await self.env.areset(seed=seed, options=options)
        traj = self.env.trajectory
        self._state = TIRState(env_id=self.env_id, task_id=str(traj.task_id),
                               episode_id=episode_id or uuid.uuid4().hex)
        return self._observation(obs["tokens"].tolist(), info, done=False, reward=None)

    async def step_async(self, action: TokenAction, timeout_s: Optional[float] = None,
                         **kwargs: Any) -> TokenObservation:
        if action.text is not None and action.tokens:
            raise ValueError("send tokens or text, not both")
        if self.env is None or self.env.trajectory is None:
            raise ValueError("reset before step")
        act: Any = {"tokens": list(action.tokens), "logprobs": action.logprobs}
        drift_before = 0
        if action.text is not None:
            act, drift_before = await self._text_action(action.text)
        obs, reward, terminated, truncated, info = await self.env.astep(act)
        if action.text is not None:
            await self._count_drift(drift_before)
        self._state.step_count += 1
        self._state.turns = len(self.env.trajectory.turns)
        out = self._observation(obs["tokens"].tolist(), info, terminated or truncated, reward)
        out.truncated = bool(truncated)
        out.turn_status = info["turn"].status or ""
        return out

    async def _text_action(self, text: str) -> tuple[dict[str, Any], int]:
        """A text action as the ids the env would encode it to, and the ledger's drift before
        it: refused before it is tokenized when it is longer than any text that can fit the
        tokens left, else tokenized off the loop (see the module docstring)."""
        left = max(1, self.env.limits.max_new_tokens)
        limit = TEXT_CHARS_PER_TOKEN * left
        if len(text) > limit:
            raise ValueError(f"the text action has {len(text):,} characters; with {left} "
                             f"tokens left at most {limit:,} can fit: send fewer")
        codec, ledger = self.env.codec, self._ledger()
        ids, before = await _off_loop(lambda: (codec.encode(text), codec.drift(ledger)),
                                      heavy=len(text) + len(ledger) >= HEAVY_FROM)
        return {"tokens": ids}, before

    async def _count_drift(self, before: int) -> None:
        """What the env records for a text action (``Trajectory.retokenized``, the drift it
        added), measured off the loop on the ledger up to the end of the action."""
        traj = self.env.trajectory
        end = traj.turns[-1].action_span[1] if traj.turns else len(traj.token_ids)
        codec, ledger = self.env.codec, self._ledger(end)
        after = await _off_loop(lambda: codec.drift(ledger), heavy=len(ledger) >= HEAVY_FROM)
        traj.retokenized = True
        traj.drift += max(0, after - before)

    def _ledger(self, end: int | None = None) -> list[int]:
        traj = self.env.trajectory
        return list(traj.prompt_ids) + list(traj.token_ids[:end])

    def _observation(self, ids: list[int], info: dict[str, Any], done: bool,
                     reward: Optional[float]) -> TokenObservation:
        traj = self.env.trajectory
        return TokenObservation(
            tokens=ids, text=self.env.codec.decode(ids), prompt_ids=list(traj.prompt_ids),
            ledger_token_ids=list(traj.token_ids), ledger_loss_mask=list(traj.loss_mask),
            stop_sequences=list(info["stop_sequences"]), stop_token_ids=self._stop_ids,
            max_new_tokens=int(info["max_new_tokens"]), done=done,
            reward=None if reward is None else float(reward),
            infra_failed=bool(traj.infra_failed),
            correct=traj.correct if done else None,
            reward_components={k: float(v) for k, v in traj.reward_components.items()}
            if done else {}, stop_reason=(traj.stop_reason or "") if done else "",
            answer=None if not done or traj.answer is None else str(traj.answer),
            task_id=str(traj.task_id))

    @property
    def state(self) -> TIRState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name=self.env_id, version="tir-envs",
            description=f"{self.env_id} served by tir-envs: token-in/token-out; actions and "
                        "observations are ids of the tokenizer pinned in readme_content",
            readme_content=json.dumps({"tokenizer": self.pin}))

    def close(self) -> None:
        env, self.env = self.env, None
        if env is not None:
            (self._release or _close)(env)


def _close(env: Any) -> None:
    env.close()


class EnvPool:
    """Envs of ended sessions kept for the next (at most ``size``): a client that connects,
    resets and leaves over and over costs one build, not one per connection.  An env is
    reusable as it is: its next reset closes what the last episode opened."""

    def __init__(self, make: Callable[[], Any], size: int):
        self.make, self.size = make, size
        self._free: list[Any] = []
        self._lock = threading.Lock()

    def take(self) -> Any:
        with self._lock:
            if self._free:
                return self._free.pop()
        return self.make()

    def give(self, env: Any) -> None:
        with self._lock:
            if len(self._free) < self.size:
                self._free.append(env)
                return
        env.close()


def stop_token_ids(env: Any) -> list[int]:
    """The ids that end a generation: the tokenizer's end of sequence and every stop string
    that is one special token (e.g. ``<|im_end|>``)."""
    tok = env.tokenizer
    ids = {tok.eos_token_id} if getattr(tok, "eos_token_id", None) is not None else set()
    special = set(getattr(tok, "all_special_tokens", []) or []) | set(
        getattr(tok, "added_tokens_encoder", {}) or {})
    for text in [env.codec.eos_text, *env.stop_sequences]:
        if text and text in special:
            ids.add(tok.convert_tokens_to_ids(text))
    return sorted(i for i in ids if isinstance(i, int))


async def _off_loop(job: Callable[[], Any], heavy: bool) -> Any:
    """A ``heavy`` job on a worker thread, at most ``TEXTS_AT_ONCE`` at a time (a slot is
    freed when its job has ended, not when a caller gave up, so abandoned jobs cannot pile
    up); a light one (a short text, a short ledger) at once on the loop, so a client's
    ordinary step never waits behind another's huge one."""
    if not heavy:
        return job()
    await _TEXTS.acquire(None)

    def run() -> Any:
        try:
            return job()
        finally:
            _TEXTS.release()
    return await asyncio.to_thread(run)


def _run(coro):
    from tir_envs.sync_bridge import run_sync
    return run_sync(coro)


def build_app(env_id: str, env_kwargs: dict[str, Any] | None = None, max_sessions: int = 8,
              idle_s: float | None = None):
    """OpenEnv's FastAPI app serving ``env_id`` (every session its own env; a session idle
    ``idle_s`` seconds is ended, its env closed)."""
    from openenv.core.env_server.http_server import create_fastapi_app
    from openenv.core.env_server.types import ConcurrencyConfig

    from tir_envs.env_factory import env_factory
    from tir_envs.tokenizer import tokenizer_pin

    make_env = env_factory(env_id, env_kwargs)
    probe = make_env()  # fails now, with the env's own message, on bad arguments
    pin = tokenizer_pin(probe.unwrapped.tokenizer)
    probe.close()
    pool = EnvPool(make_env, max_sessions)
    factory = lambda: TIREnvironment(pool.take, env_id, pin, pool.give)  # noqa: E731
    return create_fastapi_app(factory, TokenAction, TokenObservation,
                              concurrency_config=ConcurrencyConfig(
                                  max_concurrent_envs=max_sessions, session_timeout=idle_s))
