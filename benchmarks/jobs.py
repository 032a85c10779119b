"""A benchmark run's unit of work: one sample of one suite item (``Job``), and the plan of them.

A ``Job`` is made once, by ``plan``, and carried through: the episode that plays it (locally or
on a Ray worker) is told it, and it comes back with its trajectory to become the sample's
record.  Nothing is rebuilt from an episode's tags.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from tir_envs.rollout.policy import Generation, SamplingParams
from tir_envs.task import Task
from tir_envs.trajectory import Trajectory

from tir_envs.bench.suites import Part, Suite


@dataclass(frozen=True)
class Job:
    """One sample to run: which suite item, which sample of it, and its sampling seed."""

    suite: str
    part: Part
    item: int
    sample: int
    seed: int | None
    task: Task
    #: the protocol of the env that plays it (set by the executor): how an answer is written,
    #: for policies that script one (``tir_envs.bench.oracle``)
    protocol: Any = field(default=None, compare=False, repr=False)


#: called with each job and its trajectory as its episode ends (completion order)
OnSample = Callable[[Job, Trajectory], None]


class JobPolicy:
    """The user's policy as one job's episode sees it: told the job when it asks
    (``generate_job(job, prompt_ids, stop, sampling)``), with the playing env's ``protocol``."""

    def __init__(self, policy: Any, job: Job, protocol: Any = None):
        self.policy = policy
        self.job = job if protocol is None else dataclasses.replace(job, protocol=protocol)
        self._by_job = getattr(policy, "generate_job", None)

    async def generate(self, prompt_ids: Sequence[int], stop: Sequence[str],
                       sampling: SamplingParams) -> Generation:
        if self._by_job is not None:
            return await self._by_job(self.job, prompt_ids, stop, sampling)
        return await self.policy.generate(prompt_ids, stop, sampling)


def sample_seed(seed: int | None, item: int, sample: int, k: int) -> int | None:
    """The sampling seed of sample ``sample`` of item ``item`` (``None``: unseeded)."""
    return None if seed is None else seed + item * k + sample


def plan(suite: Suite, k: int, seed: int | None, limit: int | None,
         finished: set[tuple[int, int]]) -> tuple[list[Job], int]:
    """The jobs still to run, in item then sample order, and how many are already done."""
    jobs, done = [], 0
    for item, (part, task) in enumerate(suite.items(limit)):
        for sample in range(k):
            if (item, sample) in finished:
                done += 1
                continue
            jobs.append(Job(suite.name, part, item, sample, sample_seed(seed, item, sample, k),
                            task))
    return jobs, done
