"""``EpisodeRunner``: the one episode loop of the project.

reset (through the env's hooks) -> the env's ``GenerationLimits`` -> ``policy.generate`` ->
``astep`` -> ... until the env (or a wrapper) ends the episode.  Every caller drives episodes
through it: the rollout engine (``collect``), the trainer adapters (``trainers/openrlhf``,
``trainers/grpo``) and the benchmark harness.  It owns

* **one env pool**: envs made on demand from an id or a factory (closed by ``aclose``), or the
  caller's own instances (reused, left open, so sandboxes and indexes stay warm);
* **one failure record**: a policy that cannot generate (``policy_error``), an env or tool that
  raises (``infra``), an episode past ``episode_timeout_s`` (``timeout``) all give a kept
  trajectory with ``trajectory.failure`` set and ``infra_failed=True``, never an exception;
* **cancellation**: a cancelled episode closes its tool sessions and returns its env before the
  cancellation goes on.

``run`` is the whole loop.  ``open`` gives the same episode one phase at a time
(``RunnerEpisode``) to a caller whose framework owns the loop (OpenRLHF's executor generates by
itself and calls back); a ``Lockstep`` makes the episodes of a batch wait for each other between
phases, which is the synchronous baseline schedule (``collect(mode="sync")``), with no second
loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import deque
from typing import Any, Callable, Mapping, Sequence, Union

import gymnasium as gym

from tir_envs.env_factory import env_factory
from tir_envs.tokenizer import vocab_mismatch
from tir_envs.limits import GenerationLimits
from tir_envs.rollout.async_env import AsyncEnv
from tir_envs.rollout.policy import Generation, Policy, PolicyError, SamplingParams
from tir_envs.trajectory import EpisodeFailure, Trajectory
from tir_envs.validation import check_positive_number

EnvSpec = Union[str, Callable[[], gym.Env], Sequence[gym.Env]]

__all__ = ["EpisodeRunner", "RunnerEpisode", "EpisodeFailure", "GenerationLimits", "Lockstep",
           "check_vocab", "failure_of", "EnvSpec"]


class Lockstep:
    """A phase barrier for the episodes of one batch (the synchronous schedule).

    Each live episode waits at every phase boundary until every other live episode of the
    batch got there too; an episode that ends (or fails) leaves, so the rest never wait for it.
    """

    def __init__(self, parties: int):
        self.parties = parties
        self.arrived = 0
        self._open: asyncio.Future | None = None

    async def wait(self) -> None:
        self.arrived += 1
        if self.arrived >= self.parties:
            self._release()
            return
        if self._open is None:
            self._open = asyncio.get_running_loop().create_future()
        gate = self._open
        try:
            await gate
        except asyncio.CancelledError:  # e.g. the episode's deadline while it waited
            if gate is self._open:
                self.arrived -= 1
            raise

    def leave(self) -> None:
        self.parties -= 1
        if self.arrived and self.arrived >= self.parties:
            self._release()

    def _release(self) -> None:
        gate, self._open = self._open, None
        self.arrived = 0
        if gate is not None and not gate.done():
            gate.set_result(None)


class RunnerEpisode:
    """One episode on one leased env, a phase at a time (``EpisodeRunner.open``).

    ``limits`` is what the next generation must obey; ``step(generation)`` hands the env the
    policy's ids (or its text, when the backend could only return text) and reads the next
    limits; ``fail`` records a failure; ``close`` ends the episode and returns the env.
    """

    def __init__(self, runner: "EpisodeRunner", env: AsyncEnv, options: dict[str, Any] | None,
                 tags: Mapping[str, Any] | None):
        self.runner, self.env = runner, env
        self.options = options or {}
        self.tags = dict(tags or {})
        self.trajectory: Trajectory | None = None
        self.limits: GenerationLimits | None = None
        self.info: dict[str, Any] = {}
        self.done = False
        self.started = time.perf_counter()
        self.generate_s = 0.0
        self.step_s = 0.0
        self.finish_reasons: list[str] = []
        self.policy_versions: list[int | None] = []  # per action: the weights that sampled it
        self._closed = False

    async def reset(self, seed: int | None = None) -> Any:
        """Reset the env on this episode's task (its ``on_reset`` hooks run here); returns the
        observation."""
        obs, self.info = await self.env.reset(seed=seed, options=self.options)
        self.trajectory = self.env.base.trajectory
        self.limits = GenerationLimits.from_info(self.info)
        return obs

    async def generate(self, policy: Policy, sampling: SamplingParams) -> Generation:
        """Ask ``policy`` for the next action under the env's current limits.  Whatever the
        backend raises is a ``PolicyError`` (its failure, not the env's)."""
        params = dataclasses.replace(sampling, max_tokens=self.limits.cap(sampling.max_tokens),
                                     stop_token_ids=tuple(dict.fromkeys(
                                         (*sampling.stop_token_ids,
                                          *self.limits.stop_token_ids))))
        ids = list(self.trajectory.input_ids)
        if self.runner.prompt_view is not None:  # not the policy's failure if it raises
            ids = self.runner.prompt_view(self.env.base, ids)
        t0 = time.perf_counter()
        before = getattr(policy, "version", None)  # the weights this call starts with
        try:
            gen = await policy.generate(ids, list(self.limits.stop), params)
            _check_generation(gen, policy)
        except PolicyError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the backend raised, it is its failure
            raise PolicyError(f"{type(policy).__name__}.generate failed: "
                              f"{type(exc).__name__}: {exc}") from exc
        self.generate_s += time.perf_counter() - t0
        self.record_version(before if gen.policy_version is None else gen.policy_version)
        return gen

    def record_version(self, version: int | None) -> None:
        """Which weights sampled the next action (``None``: not known).  ``generate`` calls it;
        an adapter whose framework generates outside ``generate`` (OpenRLHF's loop) calls it
        before ``step``, so the ledger still says which weights sampled each action."""
        self.policy_versions.append(None if version is None else int(version))

    async def step(self, gen: Generation) -> tuple[Any, float]:
        """Hand the env one generated action; returns ``(observation, reward)``."""
        self.finish_reasons.append(gen.finish_reason)
        if gen.retokenized:  # only text came back: the env encodes it and records the drift
            action: Any = gen.text if gen.text is not None else \
                self.env.base.codec.decode(gen.token_ids)
        else:
            action = {"tokens": list(gen.token_ids), "logprobs": gen.logprobs}
        t0 = time.perf_counter()
        obs, reward, terminated, truncated, self.info = await self.env.step(action)
        self.step_s += time.perf_counter() - t0
        self.done = bool(terminated or truncated)
        if self.done and not (self.trajectory.terminated or self.trajectory.truncated):
            await self._ended_by_wrapper(terminated, truncated)
        if not self.done:
            self.limits = GenerationLimits.from_info(self.info)
        return obs, reward

    async def _ended_by_wrapper(self, terminated: bool, truncated: bool) -> None:
        """A wrapper (e.g. ``TimeLimit``) ended the episode before the env did: record that on
        the ledger (no outcome reward was computed) and close the episode's tool sessions."""
        traj = self.trajectory
        traj.terminated, traj.truncated = terminated, truncated
        traj.stop_reason = traj.stop_reason or "wrapper"
        await _close_sessions(self.env.base)

    def fail(self, failure: EpisodeFailure | BaseException) -> Trajectory:
        """Keep the ledger so far, flagged with ``failure`` (or the failure an exception is:
        ``failure_of``); a fresh ledger if the reset failed."""
        if not isinstance(failure, EpisodeFailure):
            failure = failure_of(failure)
        if self.trajectory is None:
            task = self.options.get("task")
            self.trajectory = Trajectory(
                task_id=getattr(task, "id", str(self.options.get("index", ""))),
                env_id=getattr(self.env.base, "env_id", ""))
        self.trajectory.fail(failure)
        self.done = True
        return self.trajectory

    async def close(self) -> Trajectory | None:
        """End the episode: close tool sessions an unfinished episode still holds, record the
        timings and tags, return the env to the pool.  Returns the trajectory."""
        if self._closed:
            return self.trajectory
        self._closed = True
        try:
            if self.trajectory is None or self.trajectory.failure is not None or not self.done:
                await _close_sessions(self.env.base)
        finally:
            self.runner._pool.release(self.env)
        traj = self.trajectory
        if traj is not None:
            traj.metadata.update({
                **self.tags, "episode_s": round(time.perf_counter() - self.started, 6),
                "generate_s": round(self.generate_s, 6), "step_s": round(self.step_s, 6),
                "finish_reasons": self.finish_reasons, **_versions(self.policy_versions)})
        return traj


class EpisodeRunner:
    """Runs one episode of one env against one policy; owns the one env pool.

    ``env``: an env id (made with ``tir_envs.make(id, **env_kwargs)``), a factory returning a
    new env (one per concurrent episode, reused across episodes, closed by ``aclose``), or a
    list of env instances (at most ``len(env)`` episodes at once; reused and left open).
    ``sampling``: the default ``SamplingParams`` of ``run``; ``episode_timeout_s``: the
    wall-clock limit of one episode (``None``: none).  ``prompt_view(env, ledger_ids)``: the
    ids the policy is given instead of the ledger's context (``tir_envs.chat.served.
    served_prompt``: the conversation as a server re-renders it); the ledger is unchanged.
    """

    def __init__(self, env: EnvSpec, *, env_kwargs: dict[str, Any] | None = None,
                 sampling: SamplingParams | None = None,
                 episode_timeout_s: float | None = None,
                 prompt_view: Callable[[Any, list[int]], list[int]] | None = None):
        check_positive_number(episode_timeout_s=episode_timeout_s, unit="seconds",
                              allow_none=True)
        self.sampling = sampling or SamplingParams()
        self.episode_timeout_s = episode_timeout_s
        self.prompt_view = prompt_view
        self._pool = _EnvPool(env, env_kwargs)
        self._checked: Any = None

    # ------------------------------------------------------------------ the pool
    @property
    def pool(self) -> "_EnvPool":
        """The envs (``pool.envs``) and those idle now (``pool.free``)."""
        return self._pool

    @property
    def first_env(self) -> gym.Env:
        """An env of the pool (made if none yet): to read its tasks or tokenizer."""
        return self._pool.first

    @property
    def capacity(self) -> int | None:
        """How many episodes can run at once (``None``: as many as asked, envs are made)."""
        return self._pool.capacity

    async def warm_up(self, width: int = 1) -> None:
        """Before any episode starts: make the ``width`` envs the run will use (making one
        blocks the event loop, which would land on other episodes' tool latency), and let the
        env's tools load what their first call would (``Tool.warm_up``: a search index, a
        JVM), so a cold start is not counted in the first episodes' latency.  A tool that
        cannot warm up is left to fail in its episode, recorded as the infrastructure error
        it is."""
        self._pool.prefill(width)
        env = self._pool.first.unwrapped
        if not getattr(env, "use_tools", True):
            return
        for tool in dict(getattr(env, "tools", None) or {}).values():
            warm = getattr(tool, "warm_up", None)  # a tool not built on Tool may lack it
            try:
                if warm is not None:
                    await warm()
            except Exception:  # noqa: BLE001 - the episode's own call reports it
                pass

    def check_policy(self, policy: Any) -> None:
        """Refuse a policy whose vocabulary differs from the env's (``check_vocab``)."""
        if not callable(getattr(policy, "generate", None)):
            raise TypeError(f"policy must have an async generate(prompt_ids, stop, sampling); "
                            f"got {type(policy).__name__}")
        if policy is not self._checked:
            check_vocab(policy, self._pool.first)
            self._checked = policy

    # ------------------------------------------------------------------ episodes
    async def open(self, *, options: dict[str, Any] | None = None, seed: int | None = None,
                   tags: Mapping[str, Any] | None = None) -> RunnerEpisode:
        """Lease an env and reset it: a ``RunnerEpisode`` to drive a phase at a time.  A reset that
        raises returns the env to the pool and raises (the caller has no prompt to go on)."""
        episode = RunnerEpisode(self, await self._pool.lease(), options, tags)
        try:
            await episode.reset(seed)
        except BaseException:
            episode.done = True
            await asyncio.shield(episode.close())
            raise
        return episode

    async def run(self, policy: Policy, *, options: dict[str, Any] | None = None,
                  seed: int | None = None, sampling: SamplingParams | None = None,
                  tags: Mapping[str, Any] | None = None,
                  lockstep: Lockstep | None = None) -> Trajectory:
        """One whole episode; always returns its trajectory (a failure is kept and flagged).

        ``options``/``seed``: the env's reset arguments.  ``sampling``: used as given (its
        ``seed`` too: per-episode seeds are the caller's choice); default the runner's.
        ``tags`` land in ``trajectory.metadata``.  ``lockstep``: wait for the other episodes
        of a batch between phases (the synchronous schedule)."""
        self.check_policy(policy)
        params = sampling or self.sampling
        episode = RunnerEpisode(self, await self._pool.lease(), options, tags)
        deadline = asyncio.timeout(self.episode_timeout_s)
        try:
            async with deadline:
                await self._play(episode, policy, params, seed, lockstep)
        except asyncio.CancelledError:
            if lockstep is not None:
                lockstep.leave()
                lockstep = None
            await asyncio.shield(episode.close())
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is kept, flagged, and named
            episode.fail(EpisodeFailure("timeout", f"episode ran past episode_timeout_s="
                                                   f"{self.episode_timeout_s}")
                         if deadline.expired() else exc)
        finally:
            if lockstep is not None:
                lockstep.leave()
        return await episode.close()

    async def _play(self, episode: RunnerEpisode, policy: Policy, sampling: SamplingParams,
                    seed: int | None, lockstep: Lockstep | None) -> None:
        await episode.reset(seed)
        while not episode.done:
            if lockstep is not None:
                await lockstep.wait()
            gen = await episode.generate(policy, sampling)
            if lockstep is not None:
                await lockstep.wait()
            await episode.step(gen)

    async def aclose(self) -> None:
        """Close the open tool sessions of every env; close the envs the runner made."""
        await self._pool.close()

    def close(self) -> None:
        """``aclose`` from sync code (outside a running event loop)."""
        asyncio.run(self.aclose())


# ---------------------------------------------------------------------- the env pool
class _EnvPool:
    """Envs leased to episodes, one episode per env at a time.  Made on first need from an id
    or factory (and closed at the end), or given by the caller as a list of instances (reused,
    never closed here, so a trainer keeps its envs, sandboxes and indexes warm)."""

    def __init__(self, env: EnvSpec, env_kwargs: dict[str, Any] | None):
        self.owned = not isinstance(env, (list, tuple))
        self.envs: list[AsyncEnv] = []
        if self.owned:
            self.make = env_factory(env, env_kwargs)
        else:
            if not env or not all(isinstance(e, gym.Env) for e in env):
                raise TypeError("a list of envs must hold gymnasium.Env instances (one per "
                                "concurrent episode)")
            if len({id(e.unwrapped) for e in env}) != len(env):
                raise ValueError("the list of envs holds the same env twice; each concurrent "
                                 "episode needs its own")
            if env_kwargs:
                raise ValueError("env_kwargs only apply to an env id or factory, not to "
                                 "instances")
            self.envs = [AsyncEnv(e) for e in env]
        self.free: list[AsyncEnv] = list(reversed(self.envs))
        self.waiters: deque[asyncio.Future] = deque()

    @property
    def capacity(self) -> int | None:
        return None if self.owned else len(self.envs)

    @property
    def first(self) -> gym.Env:
        if not self.envs:
            self.free.append(self._new())
        return self.envs[0].env

    def prefill(self, width: int) -> None:
        """Make envs (an owned pool) until ``width`` exist, all free."""
        while self.owned and len(self.envs) < width:
            self.free.append(self._new())

    def _new(self) -> AsyncEnv:
        env = AsyncEnv(self.make())
        self.envs.append(env)
        return env

    async def lease(self) -> AsyncEnv:
        if self.free:
            return self.free.pop()
        if self.owned:
            return self._new()
        waiter = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        return await waiter

    def release(self, env: AsyncEnv) -> None:
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(env)
                return
        self.free.append(env)

    async def close(self) -> None:
        for e in self.envs:  # caller's envs stay reusable: only end open episodes' sessions
            e.detach()
            await _close_sessions(e.base)
            if self.owned:
                try:
                    e.env.close()
                except Exception:  # noqa: BLE001 - closing must not hide the run's result
                    pass
        if self.owned:
            self.envs, self.free = [], []


async def _close_sessions(env: gym.Env) -> None:
    try:
        await env.unwrapped.aclose()
    except Exception:  # noqa: BLE001 - closing must not hide the run's result
        pass


# ---------------------------------------------------------------------- checks
def failure_of(exc: BaseException) -> EpisodeFailure:
    """The failure an exception out of an episode's phase is: the policy's (``PolicyError``)
    or the env's / a tool's (``infra``).  (Only the runner's deadline is a ``timeout``: a
    ``TimeoutError`` raised inside a phase, an HTTP request say, is that phase's failure.)"""
    if isinstance(exc, PolicyError):
        return EpisodeFailure("policy_error", str(exc))
    return EpisodeFailure("infra", f"{type(exc).__name__}: {exc}")


def check_vocab(policy: Any, env: gym.Env) -> None:
    """Refuse a policy whose token ids mean something else than the env's, before any episode
    runs (otherwise every action decodes to the wrong text, or is rejected by ``step``).

    Compared where the policy says: its ``vocab_size`` or its ``tokenizer``'s length against
    the env's tokenizer; with two different tokenizer objects of one size, a sample of ids."""
    env_tok = getattr(env.unwrapped, "tokenizer", None)
    policy_tok = getattr(policy, "tokenizer", None)
    policy_size = getattr(policy, "vocab_size", None)
    if policy_size is None and policy_tok is not None:
        policy_size = len(policy_tok)
    if env_tok is None or not isinstance(policy_size, int):
        return  # nothing to compare: the policy does not say what its ids are
    env_size, name = len(env_tok), type(policy).__name__
    fix = ("give both the same tokenizer, e.g. env_kwargs={'tokenizer': policy.tokenizer} "
           "(or tir_envs.make(env_id, tokenizer=policy.tokenizer))")
    if policy_size != env_size:
        raise ValueError(f"vocabulary mismatch: the policy ({name}) has {policy_size} token ids "
                         f"but the env's tokenizer has {env_size}, so the same id would mean "
                         f"different text to each; {fix}")
    differs = None if policy_tok is None else vocab_mismatch(env_tok, policy_tok)
    if differs is not None:
        raise ValueError(f"vocabulary mismatch: the policy ({name}) and the env both have "
                         f"{env_size} token ids, but {differs} (the policy's against the "
                         f"env's); {fix}")


def _check_generation(gen: Any, policy: Any) -> None:
    name = type(policy).__name__
    if not isinstance(gen, Generation):
        raise TypeError(f"{name}.generate returned {type(gen).__name__}, expected a Generation")
    if gen.logprobs is not None and len(gen.logprobs) != len(gen.token_ids):
        raise ValueError(f"{name}.generate returned {len(gen.logprobs)} logprobs for "
                         f"{len(gen.token_ids)} tokens; return one per token or None")


def _versions(versions: list[int | None]) -> dict[str, object]:
    """``policy_versions`` (per action) and ``policy_version`` (the oldest: what a staleness
    filter compares with the trainer's current version) when the policy says which weights
    sampled each action; nothing when it never does."""
    known = [v for v in versions if v is not None]
    if not known:
        return {}
    return {"policy_versions": list(versions), "policy_version": min(known)}

