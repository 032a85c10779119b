"""The audit through the wire: every probe played against a tir env served over OpenEnv.

``tir-envs audit ENV_ID --via openenv`` serves the env on OpenEnv's own server in this process
(``tir_envs.serving.openenv_server``), ``--via URL`` uses one already running (``tir-envs serve
openenv ENV_ID`` with the same arguments).  Each episode then goes over OpenEnv's WebSocket
with OpenEnv's own client, token ids out and in, exactly as an OpenEnv consumer (TRL, SkyRL)
plays it: the reset picks the task by ``index``, the reward is the sum of the wire's step
rewards, and ``correct``, ``infra_failed``, ``stop_reason``, ``answer`` and the turn statuses
are read from the observation's typed fields.

A local copy of the env (same id, same arguments) supplies only what a probe is built from:
the protocol, the tools, the tasks' golds and the tokenizer.  The server must agree with it:
the same env id, the same tokenizer (``/metadata``'s pin) and, at every reset, the same task.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable, Mapping

from tir_envs.audit.candidates import Candidates
from tir_envs.audit.runner import MAX_NEW_TOKENS, EpisodeRecord, ProbePolicy, control_ids, \
    most_specials
from tir_envs.rollout.policy import SamplingParams


@asynccontextmanager
async def wire(via: str, env: Any, env_kwargs: Mapping[str, Any] | None,
               twin: Any) -> AsyncIterator[str]:
    """The base URL of the served env: served here (``via="openenv"``) or at ``via``."""
    if not isinstance(env, str):
        raise ValueError("via= plays the audit over OpenEnv: give an env id (the server makes "
                         "its envs from the id and env_kwargs), not a factory")
    if via == "openenv":
        from tir_envs.envs.openenv_local import release, serve
        from tir_envs.serving.openenv_server import build_app
        app = await asyncio.to_thread(build_app, env, dict(env_kwargs or {}))
        server = await asyncio.to_thread(serve, app)
        try:
            yield server.url
        finally:
            await asyncio.to_thread(release, server)
        return
    if not via.startswith(("http://", "https://")):
        raise ValueError(f"via={via!r}: expected 'openenv' (serve the env here) or the URL of "
                         "a running 'tir-envs serve openenv' server")
    url = via.rstrip("/")
    await asyncio.to_thread(check_server, url, env, twin)
    yield url


def check_server(url: str, env_id: str, twin: Any) -> None:
    """The server at ``url`` serves ``env_id`` with the local copy's tokenizer, or raise."""
    from tir_envs.tokenizer import tokenizer_pin
    try:
        with urllib.request.urlopen(f"{url}/metadata", timeout=10) as response:  # noqa: S310
            meta = json.loads(response.read())
    except Exception as exc:  # noqa: BLE001 - one clear error for every way it fails
        raise ConnectionError(f"cannot read {url}/metadata (is 'tir-envs serve openenv' running "
                              f"there?): {type(exc).__name__}: {exc}") from exc
    if meta.get("name") != env_id:
        raise ValueError(f"{url} serves {meta.get('name')!r}, not {env_id!r}")
    try:
        pin = json.loads(meta.get("readme_content") or "{}").get("tokenizer")
    except json.JSONDecodeError:
        pin = None
    if pin != tokenizer_pin(twin.tokenizer):
        raise ValueError(f"{url} pins another tokenizer than the local {env_id}'s: start both "
                         "with the same tokenizer= (the probes' ids would mean other text)")


def wire_player(url: str, twin: Any, episode_timeout_s: float) -> Callable:
    """``play(index, candidates, build)`` for the audit, over the wire."""
    specials = control_ids(twin.tokenizer)

    async def play(index: int, candidates: Candidates, build: Callable) -> EpisodeRecord:
        task = twin.tasks[index]
        record = EpisodeRecord(task_id=str(task.id))
        policy = ProbePolicy(twin, candidates, build, task=task)
        started = time.perf_counter()
        try:
            await asyncio.wait_for(_episode(url, policy, index, record, specials,
                                            episode_timeout_s), episode_timeout_s)
        except asyncio.TimeoutError:
            record.error = f"timeout: the episode did not end within {episode_timeout_s:g} s"
        except TaskMismatch:
            raise
        except Exception as exc:  # noqa: BLE001 - the server's failure: the episode is masked
            record.error = f"infra: {type(exc).__name__}: {exc}"
        record.seconds = time.perf_counter() - started
        return record
    return play


class TaskMismatch(ValueError):
    """The server reset onto another task than the local copy's: the golds would not match."""


async def _episode(url: str, policy: ProbePolicy, index: int, record: EpisodeRecord,
                   specials: frozenset[int], timeout_s: float) -> None:
    from openenv.core import GenericEnvClient

    async with GenericEnvClient(base_url=url, message_timeout_s=timeout_s) as client:
        obs = (await client.reset(index=index)).observation
        if str(obs.get("task_id")) != record.task_id:
            raise TaskMismatch(f"the server's task {index} is {obs.get('task_id')!r}, the "
                               f"local copy's is {record.task_id!r}: start the server with "
                               "the same tasks")
        context, spans, total = list(obs["tokens"]), [], 0.0
        while True:
            limit = int(obs.get("max_new_tokens") or MAX_NEW_TOKENS)
            gen = await policy.generate(context, list(obs["stop_sequences"]),
                                        SamplingParams(max_tokens=limit))
            result = await client.step({"tokens": list(gen.token_ids)})
            obs = result.observation
            total += float(result.reward or 0.0)
            start = len(context) + len(gen.token_ids)
            context += list(gen.token_ids) + list(obs["tokens"])
            spans.append((start, len(context)))
            if obs.get("turn_status"):
                record.statuses.append(obs["turn_status"])
            if result.done:
                break
    record.reward, record.correct = total, obs.get("correct")
    record.infra_failed = bool(obs.get("infra_failed"))
    record.stop_reason, record.answer = obs.get("stop_reason") or "", obs.get("answer")
    record.answered = record.answer is not None
    record.void = not record.answered and all(s == "no_call" for s in record.statuses)
    record.env_specials = most_specials(context, spans, specials)
