"""Rewards the agent cannot touch: computed by the host when an episode finishes.

The reward reads only what the gateway saw the **policy** write: the final answer is the
content of the last completion the gateway returned, and the conversation is the last request
the agent sent plus that completion.  Nothing the agent program returns or sends (a score, a
claimed answer, a header) is read.  Two kinds:

* a shipped ``tir_envs.rewards.Reward`` (math, QA, SQL, IFEval): its ``read_answer`` reads the
  answer from the final completion's text as its paper's protocol does, ``score`` grades it
  against ``task``'s gold (``task`` a ``tir_envs.task.Task``);
* a function ``f(task, conversation) -> float`` (sync or async), for anything else.

Every trainable segment of the episode gets the value (``Trajectory.reward``) and it is credited
at the segment's last sampled token, where every trainer reads outcome rewards.
"""

from __future__ import annotations

import inspect
from typing import Any

from tir_envs.rewards.base import Reward, RewardResult
from tir_envs.trajectory import Trajectory


class HostReward:
    """``reward=`` of a gateway (see the module docstring); ``None`` gives no reward."""

    def __init__(self, reward: Any = None):
        if reward is not None and not isinstance(reward, Reward) and not callable(reward):
            raise TypeError("reward must be a tir_envs.rewards.Reward or a function "
                            f"(task, conversation) -> float, got {type(reward).__name__}")
        self.reward = reward
        self.last: RewardResult | None = None

    async def score(self, episode: Any) -> float | None:
        if self.reward is None:
            return None
        if isinstance(self.reward, Reward):
            return self._graded(episode)
        value = self.reward(episode.task, [dict(m) for m in episode.conversation])
        if inspect.isawaitable(value):
            value = await value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"the reward function returned {type(value).__name__}; it must "
                            "return a float")
        return float(value)

    def _graded(self, episode: Any) -> float:
        # the visible answer: reasoning and call syntax removed (what the policy answered)
        text = episode.last.content if episode.last is not None else ""
        segs = episode.ledger.trajectories()
        traj = segs[-1] if segs else None
        answer = self.reward.read_answer(episode.task, [text])
        result = self.reward.score(episode.task, traj, answer)
        if traj is not None:
            traj.answer, traj.correct, traj.answered = result.answer, result.correct, \
                result.answered
            traj.reward_components = dict(result.components)
        return float(result.value)

    @staticmethod
    def credit(traj: Trajectory, reward: float | None) -> None:
        if reward is None:
            return
        traj.reward = float(reward)
        traj.credit(float(reward))
        traj.terminated = True
