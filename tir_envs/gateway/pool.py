"""``GatewayPool``: the gateway over several processes, one host API.

One gateway process serves what one core can (every call renders, encodes and parses in
Python); thousands of concurrent episodes on a 50 ms backend ask for tens of thousands of calls
a second.  A pool runs ``workers`` gateway processes, each on its own port and each owning a
disjoint set of episodes: ``open_episode`` picks the worker with the fewest open episodes and
hands out **that worker's** base URL with the episode's key, so an agent's every call goes
straight to the process holding its ledger (no forwarding, nothing shared between workers).
``finish`` fetches the ledger back from the worker (its trajectories, forks and conversation
as JSON) and scores it **on the host** with the pool's ``reward``: rewards never run in, or
depend on, a worker, and the ``EpisodeResult`` is the one a single ``Gateway`` gives.

The workers are forked from a fork server that has imported the gateway and ``transformers``
once (never from the host, whose event loop and threads a fork would copy): ``make_policy``
(a picklable callable, e.g. a module-level function or ``functools.partial``) builds each
worker's policy there, and the
other ``Gateway`` keywords (tokenizer, renderer, sampling, caps, ``idle_timeout_s`` ...) are
passed through.  The admin channel is each worker's admin routes, under a token the pool
makes.  ``open_episode`` and ``finish`` are coroutines here (``AgentSource`` takes either).
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import secrets
import signal
from dataclasses import dataclass
from typing import Any, Callable

from tir_envs.gateway.episode import EpisodeResult
from tir_envs.gateway.ledger import Fork
from tir_envs.gateway.rewards import HostReward
from tir_envs.gateway.server import GatewayFull
from tir_envs.trajectory import Trajectory

#: seconds a worker may take to start (import, load the tokenizer, bind)
START_TIMEOUT_S = 300.0
#: what a worker imports before its policy exists: loaded once, in the fork server
PRELOAD = ("tir_envs.gateway.server", "tir_envs.gateway.chat_completions",
           "tir_envs.gateway.responses", "tir_envs.gateway.anthropic_messages",
           "tir_envs.chat.registry", "tir_envs.tokenizer", "transformers")


@dataclass
class Worker:
    """One gateway process: where it listens and what the host sent it."""

    process: Any
    conn: Any
    url: str = ""
    open: int = 0


class GatewayPool:
    """See the module docstring.  ``async with GatewayPool(make_policy, workers=4, ...)``."""

    def __init__(self, make_policy: Callable[[], Any], *, workers: int = 2,
                 reward: Any = None, protocol: Any = None, **gateway_kwargs: Any):
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be an int >= 1, got {workers!r}")
        for name in ("admin_token", "port", "render"):
            if name in gateway_kwargs:
                raise TypeError(f"GatewayPool sets {name} itself (one port per worker); "
                                "leave it out")
        self.make_policy, self.n, self.kwargs = make_policy, workers, gateway_kwargs
        self.reward = HostReward(reward, protocol)
        self.admin_token = secrets.token_urlsafe(32)
        self.workers: list[Worker] = []
        #: open episodes: key -> (worker, task)
        self.owner: dict[str, tuple[Worker, Any]] = {}
        self._http: Any = None

    async def start(self) -> "GatewayPool":
        import aiohttp

        ctx = mp.get_context("forkserver")
        # the fork server imports these once; each worker forks from it with them loaded
        ctx.set_forkserver_preload(list(PRELOAD))
        for _ in range(self.n):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker_main, daemon=True, args=(
                child, self.make_policy, self.kwargs, self.admin_token))
            proc.start()
            child.close()
            self.workers.append(Worker(proc, parent))
        loop = asyncio.get_running_loop()
        try:
            for w in self.workers:
                w.url = await asyncio.wait_for(loop.run_in_executor(None, _receive, w.conn),
                                               START_TIMEOUT_S)
        except BaseException:
            await self.aclose()
            raise
        self._http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),
            headers={"Authorization": f"Bearer {self.admin_token}"},
            timeout=aiohttp.ClientTimeout(total=None))
        return self

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None
        for w in self.workers:
            try:
                w.conn.send("stop")
            except OSError:
                pass
        for w in self.workers:
            await asyncio.get_running_loop().run_in_executor(None, w.process.join, 10)
            if w.process.is_alive():
                w.process.kill()
                w.process.join()
        self.workers = []

    async def __aenter__(self) -> "GatewayPool":
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    # -- episodes -----------------------------------------------------------------
    async def open_episode(self, task: Any = None, task_id: str = "") -> tuple[str, str]:
        """``(base_url, api_key)`` on the least loaded worker (see ``Gateway.open_episode``)."""
        worker = min(self._alive(), key=lambda w: w.open)
        tid = task_id or str(getattr(task, "id", "") or (task.get("id", "") if isinstance(
            task, dict) else ""))
        body = await self._admin(worker, "/gateway/episodes", {"task_id": tid})
        worker.open += 1
        self.owner[body["api_key"]] = (worker, task)
        return body["base_url"], body["api_key"]

    async def finish(self, key: str, agent_answer: Any = None,
                     error: str | None = None) -> EpisodeResult:
        """The episode's ledger from its worker, scored on the host."""
        if key not in self.owner:
            raise KeyError("unknown episode key: pass the api_key open_episode() gave")
        worker, task = self.owner.pop(key)
        worker.open -= 1
        body = await self._admin(worker, "/gateway/episodes/finish", {"api_key": key})
        result = _result(body, task, agent_answer, error or body.get("error"))
        if result.error is None:
            result.reward = await self.reward.score(_Finished(result))
            for traj in result.trajectories:
                self.reward.credit(traj, result.reward)
        return result

    async def stats(self) -> list[dict[str, Any]]:
        """Each worker's ``Gateway.stats()`` (CPU seconds, open and expired episodes)."""
        out = []
        for w in self._alive():
            async with self._http.get(w.url + "/gateway/stats") as resp:
                out.append(await resp.json())
        return out

    def _alive(self) -> list[Worker]:
        dead = [i for i, w in enumerate(self.workers) if not w.process.is_alive()]
        if dead or not self.workers:
            raise RuntimeError(f"gateway workers {dead or 'all'} are not running (start the "
                               "pool with `async with GatewayPool(...)`; a worker that died "
                               "printed why on stderr)")
        return self.workers

    async def _admin(self, worker: Worker, path: str, body: dict) -> dict[str, Any]:
        async with self._http.post(worker.url + path, json=body) as resp:
            data = await resp.json()
            if resp.status != 200:
                message = (data.get("error") or {}).get("message", data)
                if resp.status == 503:  # that worker holds its max_episodes
                    raise GatewayFull(f"gateway worker {worker.url}: {message}")
                raise RuntimeError(f"gateway worker {worker.url}: {message}")
            return data


class _Finished:
    """What ``HostReward.score`` reads of an episode, rebuilt from a worker's ledger."""

    def __init__(self, result: EpisodeResult):
        self.task = result.task
        self.conversation = result.conversation
        self.last = None if result.answer is None else _Content(result.answer)
        self.ledger = self
        self._trajectories = result.trajectories

    def trajectories(self) -> list[Trajectory]:
        return self._trajectories

    def final(self) -> tuple[list, _Content | None, Trajectory | None]:
        """As ``GatewayEpisode.final``: the main conversation, its answer and its last
        trainable segment (a side conversation's segments are flagged ``side`` by the worker)."""
        own = [t for t in self._trajectories
               if not (t.metadata.get("gateway") or {}).get("side") and t.num_policy_tokens]
        return self.conversation, self.last, own[-1] if own else None


@dataclass
class _Content:
    content: str


def _result(body: dict[str, Any], task: Any, agent_answer: Any,
            error: str | None) -> EpisodeResult:
    return EpisodeResult(
        key_id=body["episode"], task=task,
        trajectories=[Trajectory.from_dict(t) for t in body["trajectories"]],
        reward=None, forks=[Fork(**f) for f in body["forks"]], calls=body["calls"],
        overrides=body["overrides"], conversation=body["conversation"],
        answer=body["answer"], agent_answer=agent_answer, error=error,
        metadata=body.get("metadata") or {},
        side_trajectories=[Trajectory.from_dict(t) for t in body["side_trajectories"]],
        tool_calls=body["tool_calls"], client_tools=body["client_tools"],
        breaks=body["breaks"])


def _receive(conn: Any) -> str:
    message = conn.recv()
    if isinstance(message, BaseException):
        raise RuntimeError(f"a gateway worker failed to start: {message!r}") from message
    return message


def _worker_main(conn: Any, make_policy: Callable[[], Any], kwargs: dict[str, Any],
                 admin_token: str) -> None:
    """A worker process: one ``Gateway`` until the host says stop (or goes away)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the host owns Ctrl-C and closes the pool
    try:
        asyncio.run(_serve(conn, make_policy, kwargs, admin_token))
    finally:
        conn.close()


async def _serve(conn: Any, make_policy: Callable[[], Any], kwargs: dict[str, Any],
                 admin_token: str) -> None:
    from tir_envs.gateway.server import Gateway

    try:
        gw = Gateway(make_policy(), admin_token=admin_token, port=0, **kwargs)
        await gw.start()
    except BaseException as exc:  # noqa: BLE001 - sent to the host, which raises it
        conn.send(RuntimeError(f"{type(exc).__name__}: {exc}"))
        return
    # what the worker loaded so far (modules, the tokenizer) is never garbage: keep the
    # collector's full passes off it (a tenth of a call's CPU went to them)
    import gc
    gc.collect()
    gc.freeze()
    conn.send(gw.url)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_reader(conn.fileno(), stop.set)  # a message or EOF
    try:
        await stop.wait()
    finally:
        await gw.aclose()
