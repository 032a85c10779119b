"""OpenRLHF's own multi-turn agent executor, driving a ``tir/*`` env token for token.

``TIRAgentExecutor`` is OpenRLHF's ``MultiTurnAgentExecutor`` with the env as the agent
instance.  The loop is OpenRLHF's, unchanged: it generates and calls back, so each sample is an
``EpisodeRunner`` episode driven a phase at a time (``EpisodeRunner.open``,
``RunnerEpisode.step``; the runner's env pool, failure record and reset hooks), and the adapter
only wraps the two objects the loop talks to, for one episode at a time:

* the **engine**: before each generation it sets the env's current stop strings (read from the
  env's ``info``, they change mid-episode for ZeroTIR; kept in the output) and caps
  ``max_tokens`` at the tokens the env has left; after it, it keeps the output's token ids, so
  ``step`` hands the env exactly the ids the policy generated (OpenRLHF gives ``step`` only the
  text).  This covers the first generation too, for which OpenRLHF has no stop flag.
* the **tokenizer**: the executor encodes the prompt and each observation text on its own and
  appends the ids; the adapter answers those two calls with the env's own ids for that text, so
  OpenRLHF's sequence is the env's ledger even where a fresh encoding of the decoded text would
  differ (``tir/retokenize_fixes`` counts where it did).

Each action's weights: OpenRLHF keeps no weight version, so the executor counts the weight
syncs its rollout engine receives (``weights.WeightSyncs``) and records, per action, the
version that produced its first token in the ledger (``RunnerEpisode.record_version``:
``trajectory.metadata["policy_versions"]``, ``["policy_version"]`` the oldest) and hands the
trainer ``tir/policy_version`` (the oldest) and ``tir/policy_version_max`` (the newest, larger
when a partial rollout synced weights under the episode) with the sample's ``extra_logs``,
which OpenRLHF keeps per sample in ``Experience.info``.

Episodes that hit an infrastructure failure (a tool's ``infra_error``, a gold query that does
not run, an exception out of the env) or that OpenRLHF cut before the env ended them get a NaN
``scores``: with ``--algo.dynamic_filtering_enable`` OpenRLHF then drops their prompt group.
Their ``reward`` is left as the env gave it.  See docs/openrlhf.md.
"""

from __future__ import annotations

import contextvars
import logging
import math
from copy import deepcopy
from typing import Any, Callable

import numpy as np
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

from tir_envs.rollout.policy import Generation
from tir_envs.rollout.runner import EpisodeRunner, RunnerEpisode

from tir_envs.trainers.common.env_config import EnvConfig, check_same_tokenizer
from tir_envs.trainers.common.labels import index_tasks, task_from_label
from tir_envs.trainers.common.logs import episode_logs
from tir_envs.trainers.openrlhf.weights import WeightSyncs, observe

log = logging.getLogger(__name__)

#: the episode the executor is running in this asyncio task (each OpenRLHF sample is a task)
_EPISODE: contextvars.ContextVar["OpenRLHFSample"] = contextvars.ContextVar(
    "tir_openrlhf_episode")
_WARNED: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        log.warning(message)


class _EnvTokenizer:
    """The policy's tokenizer, except that the text the adapter just returned encodes to the
    env's own ids for it (see the module docstring)."""

    def __init__(self, tokenizer: Any):
        self._tokenizer = tokenizer
        self._pending: tuple[str, list[int]] | None = None
        self.fixes = 0

    def expect(self, text: str, ids: list[int]) -> None:
        self._pending = (text, ids)

    def __call__(self, text: Any = None, *args: Any, **kwargs: Any) -> Any:
        pending, self._pending = self._pending, None
        if pending is None or args or text != pending[0]:
            return self._tokenizer(text, *args, **kwargs)
        ids = pending[1]
        fresh = self._tokenizer(text, add_special_tokens=False)["input_ids"]
        self.fixes += list(fresh) != ids
        kind = kwargs.get("return_tensors")
        if kind == "pt":
            import torch
            return {"input_ids": torch.tensor([ids], dtype=torch.long)}
        if kind == "np":
            return {"input_ids": np.asarray([ids], dtype=np.int64)}
        return {"input_ids": list(ids)}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)


class _StopEngine:
    """The vLLM engine, generating with the env's current stops and keeping each output."""

    def __init__(self, engine: Any, episode: "OpenRLHFSample"):
        self._engine, self._episode = engine, episode

    async def generate(self, prompt_token_ids: Any, sampling_params: Any, *args: Any,
                       **kwargs: Any) -> Any:
        self._episode.constrain(sampling_params)  # the executor passes a deep copy
        syncs = self._episode.syncs
        start = None if syncs is None else syncs.version
        with observe() as span:
            output = await self._engine.generate(prompt_token_ids, sampling_params, *args,
                                                 **kwargs)
        self._episode.output = output.outputs[0]
        self._episode.span = (start if span.first is None else span.first,
                              start if span.last is None else span.last)
        return output

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


class OpenRLHFSample:
    """One OpenRLHF sample: a runner episode (a ``RunnerEpisode``, which it drives) reset on
    the label's task, stepped with the ids the engine produced."""

    def __init__(self, executor: "TIRAgentExecutor", tokenizer: Any, engine: Any):
        self.executor = executor
        self.tokenizer = _EnvTokenizer(tokenizer)
        self.syncs = WeightSyncs.watch(engine)
        self.engine = _StopEngine(engine, self)
        self.live: RunnerEpisode | None = None
        self.task: Any = None
        self.output: Any = None
        #: the weights versions that produced the last generation (first, last token)
        self.span: tuple[int | None, int | None] = (None, None)
        self.versions: list[int] = []  # every version any action's tokens came from
        if self.syncs is not None:
            self.started_on = self.syncs.version

    @property
    def done(self) -> bool:
        return self.live is not None and self.live.done

    # -- the two calls of the agent instance -------------------------------------------
    async def start(self, label: Any, prompt: str | None) -> str:
        self.task = self.executor.task(label)
        self.live = await self.executor.runner.open(options={"task": self.task})
        core = self.live.env.base
        ids = list(self.live.trajectory.prompt_ids)
        text = core.codec.decode(ids)
        if prompt is not None and prompt != text:
            _warn_once("prompt", f"the dataset's prompt differs from what {core.env_id} renders "
                                 f"for task {self.task.id!r}; the env's prompt is used. Was the "
                                 "dataset written for other env arguments, or is "
                                 "--data.apply_chat_template on (leave it off)?")
        self.tokenizer.expect(text, ids)
        return text

    async def advance(self, sampling_params: Any) -> dict[str, Any]:
        live = self.live
        out, self.output = self.output, None
        ids = [int(i) for i in out.token_ids]
        live.record_version(self.span[0])
        self.versions += [v for v in self.span if v is not None]
        reward, obs_ids = 0.0, []
        try:
            obs, reward = await live.step(Generation(ids, output_logprobs(out, ids),
                                                     finish_reason=out.finish_reason))
            obs_ids = obs["tokens"].tolist()
        except Exception as exc:  # noqa: BLE001 - kept as a flagged episode, like the engine
            failure = live.fail(exc).failure
            _warn_once("fail", f"env step failed (episode kept, flagged infra_failed): "
                               f"{failure.message}")
        text = live.env.base.codec.decode(obs_ids)
        self.tokenizer.expect(text, obs_ids)
        params = deepcopy(sampling_params)
        self.constrain(params)
        return {"rewards": np.float64(reward), "scores": self.score(),
                "environment_feedback": text, "done": self.done, "sampling_params": params,
                "extra_logs": self.logs()}

    # -- pieces ----------------------------------------------------------------------
    def constrain(self, params: Any) -> None:
        """The env's current stops, kept in the output, and its remaining token budget."""
        limits = self.live.limits
        params.stop = list(limits.stop)
        params.include_stop_str_in_output = True
        if params.max_tokens is not None:
            params.max_tokens = limits.cap(int(params.max_tokens))

    def score(self) -> float:
        """The env's reward, or NaN for an episode to drop (infra failure, not ended)."""
        traj = self.live.trajectory
        if not self.done or traj.infra_failed:
            return math.nan
        return float(traj.reward)

    def logs(self, **flags: float) -> dict[str, float]:
        core = self.live.env.base
        flags.setdefault("unfinished", float(not self.done))
        flags.setdefault("ledger_mismatch", 0.0)
        if self.syncs is not None:  # no action yet: the weights it would have started on
            flags["policy_version"] = float(min(self.versions, default=self.started_on))
            flags["policy_version_max"] = float(max(self.versions, default=self.started_on))
        return episode_logs(self.live.trajectory, self.task, core.tools, **flags,
                            retokenize_fixes=float(self.tokenizer.fixes))

    def finish(self, result: dict[str, Any]) -> dict[str, Any]:
        """Final checks on OpenRLHF's result: the same ids as the ledger, the drop marks."""
        traj = self.live.trajectory
        mismatch = list(result["observation_tokens"]) != traj.prompt_ids + traj.token_ids
        if mismatch:
            _warn_once("ledger", "OpenRLHF's observation_tokens differ from the env's ledger "
                                 "(was the prompt cut to fit --data.max_len?); flagged "
                                 "tir/ledger_mismatch")
        if not self.done:
            _warn_once("unfinished", "OpenRLHF stopped an episode before the env ended it "
                                     "(--data.max_len is below the env's max_total_tokens); "
                                     "flagged tir/unfinished, scores NaN")
        result["scores"] = self.score()
        result["extra_logs"] = self.logs(ledger_mismatch=float(mismatch))
        return result

    async def release(self) -> None:
        """End the episode (an unfinished one's tool sessions are closed) and return the env."""
        if self.live is not None:
            await self.live.close()


def output_logprobs(output: Any, ids: list[int]) -> list[float] | None:
    """The sampled tokens' logprobs from a vLLM output, when it carries them."""
    steps = getattr(output, "logprobs", None)
    if not steps or len(steps) != len(ids):
        return None
    return [float(step[t].logprob) for step, t in zip(steps, ids)]


class TIRAgentInstance(AgentInstanceBase):
    """The agent instance OpenRLHF creates per sample: the running ``OpenRLHFSample``'s two
    calls."""

    def __init__(self, *args: Any, **kwargs: Any):
        episode = _EPISODE.get(None)
        if episode is None:
            raise RuntimeError("TIRAgentInstance runs only inside TIRAgentExecutor.execute "
                               "(use trainers/openrlhf/agent.py as --train.agent_func_path)")
        self.episode = episode

    async def reset(self, states: dict, **kwargs: Any) -> dict[str, str]:
        return {"observation": await self.episode.start(states["label"],
                                                        states.get("observation"))}

    async def step(self, states: dict, **kwargs: Any) -> dict[str, Any]:
        return await self.episode.advance(states["sampling_params"])


class TIRAgentExecutor(MultiTurnAgentExecutor):
    """OpenRLHF's ``MultiTurnAgentExecutor`` over a ``tir/*`` env (see the module docstring).

    ``make_env(tokenizer) -> env``: how to make an env; default: from ``TIR_ENV_ID`` /
    ``TIR_ENV_KWARGS`` or ``TIR_ENV_CONFIG`` (``tir_envs.trainers.common.env_config``).
    """

    def __init__(self, make_env: Callable[[Any], Any] | None = None):
        super().__init__(TIRAgentInstance)
        self.make_env = make_env or EnvConfig.from_environ().make
        self.runner = EpisodeRunner(self._new_env)
        self._tokenizer: Any = None
        self._tasks: dict | None = None

    @property
    def pool(self):
        """The runner's env pool: envs reused across episodes (sandboxes, indexes and databases
        stay warm), made on demand with the policy's tokenizer, one per concurrent episode."""
        return self.runner.pool

    def _new_env(self) -> Any:
        env = self.make_env(self._tokenizer)
        check_same_tokenizer(env.unwrapped, self._tokenizer)
        return env

    def task(self, label: Any):
        """The task a sample's label names or carries."""
        if self._tasks is None:
            self._tasks = index_tasks(self.runner.first_env.unwrapped.tasks)
        return task_from_label(label, self._tasks)

    async def execute(self, prompt, label, sampling_params, max_length, hf_tokenizer, llm_engine,
                      **kwargs):
        if self._tokenizer is None:
            self._tokenizer = hf_tokenizer
        episode = OpenRLHFSample(self, hf_tokenizer, llm_engine)
        token = _EPISODE.set(episode)
        try:
            result = await super().execute(prompt, label, sampling_params, max_length,
                                           episode.tokenizer, episode.engine, **kwargs)
            return episode.finish(result)
        finally:
            _EPISODE.reset(token)
            await episode.release()
