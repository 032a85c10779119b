"""The env an adapter serves inside a trainer's worker: one ``EpisodeRunner`` (and so one env
pool) per env configuration and tokenizer, shared by every episode the worker runs.

Trainers build their hook objects often (verl instantiates a new agent loop for every sample,
TRL calls the rollout function every step), while envs hold sandboxes, indexes and databases
that must stay warm, so the runner lives here, keyed by the configuration, for the life of the
process.  The runner's first env answers the task index (labels name tasks by id) and then
serves episodes like the others, so no env is made just to read the task list.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from typing import Any, Callable, Sequence

from tir_envs.rollout import EpisodeRunner
from tir_envs.task import Task
from tir_envs.trajectory import Trajectory
from tir_envs.trainers.common.env_config import EnvConfig, check_same_tokenizer
from tir_envs.trainers.common.labels import index_tasks, task_from_label

_SERVED: dict[tuple[str, str, int], "ServedEnv"] = {}


class ServedEnv:
    """An env configuration made with the policy's tokenizer, behind one ``EpisodeRunner``."""

    def __init__(self, config: EnvConfig, tokenizer: Any):
        self.config = config
        self.runner = EpisodeRunner(lambda: config.make(tokenizer))
        core = self.runner.first_env.unwrapped  # made once, then serves episodes from the pool
        check_same_tokenizer(core, tokenizer)
        self.env_id = core.env_id
        self.max_total_tokens = int(core.max_total_tokens)
        self.tool_names = sorted(core.tools)
        self.codec = core.codec
        self._tasks = index_tasks(core.tasks)
        self._loop: asyncio.AbstractEventLoop | None = None

    def task(self, label: Any) -> Task:
        """The task a dataset label names (a task id, or a whole task as JSON)."""
        return task_from_label(label, self._tasks)

    async def run(self, policy: Any, task: Task, **kwargs: Any) -> Trajectory:
        """One episode of ``task`` against ``policy`` (``kwargs``: ``EpisodeRunner.run``'s)."""
        return await self.runner.run(policy, options={"task": task}, **kwargs)

    def run_batch(self, policy: Any, tasks: Sequence[Task], **kwargs: Any) -> list[Trajectory]:
        """Episodes of ``tasks`` run concurrently, from synchronous code (a trainer's rollout
        hook), in order.  They run on this env's own event-loop thread, the same one every
        call, so the envs' tools always meet the loop they started on."""
        return self.submit_batch(policy, tasks, **kwargs).result()

    def submit_batch(self, policy: Any, tasks: Sequence[Task],
                     on_done: Callable[[], None] | None = None,
                     **kwargs: Any) -> concurrent.futures.Future:
        """``run_batch`` without waiting: the caller's thread stays free (a trainer rank drives
        its generation rounds there); ``on_done`` is called as each episode ends."""
        async def one(task: Task) -> Trajectory:
            try:
                return await self.run(policy, task, **kwargs)
            finally:
                if on_done is not None:
                    on_done()

        async def batch() -> list[Trajectory]:
            return list(await asyncio.gather(*[one(t) for t in tasks]))

        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            threading.Thread(target=self._loop.run_forever, name=f"tir-{self.env_id}",
                             daemon=True).start()
        return asyncio.run_coroutine_threadsafe(batch(), self._loop)


def served(config: EnvConfig, tokenizer: Any) -> ServedEnv:
    """The process-wide ``ServedEnv`` for this configuration and tokenizer object."""
    key = (config.env_id, json.dumps(dict(config.env_kwargs), sort_keys=True, default=repr),
           id(tokenizer))
    if key not in _SERVED:
        _SERVED[key] = ServedEnv(config, tokenizer)
    return _SERVED[key]
