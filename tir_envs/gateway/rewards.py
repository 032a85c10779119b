"""Rewards the agent cannot touch: computed by the host when an episode finishes.

The reward reads only what the gateway saw the **policy** write: the final answer is the
content of the last completion the gateway returned, and the conversation is the last request
the agent sent plus that completion.  Nothing the agent program returns or sends (a score, a
claimed answer, a header) is read.  Two kinds:

* a ``tir_envs.rewards.Reward`` (math, QA, SQL, IFEval) with the ``protocol`` that reads its
  answer: ``protocol.read(task, [final text])`` reads it as the paper's protocol does (the
  protocol owns the answer, as in every env), ``score`` grades it against ``task``'s gold
  (``task`` a ``tir_envs.task.Task``); a reward without a protocol is refused at construction;
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

    def __init__(self, reward: Any = None, protocol: Any = None):
        if reward is not None and not isinstance(reward, Reward) and not callable(reward):
            raise TypeError("reward must be a tir_envs.rewards.Reward or a function "
                            f"(task, conversation) -> float, got {type(reward).__name__}")
        if isinstance(reward, Reward) and not callable(getattr(protocol, "read", None)):
            raise TypeError(f"a {type(reward).__name__} grades the answer a protocol reads: pass "
                            "protocol= (e.g. tir_envs.protocols.math_protocol('torl'), or any "
                            "object with read(task, actions) -> answer)")
        self.reward, self.protocol = reward, protocol
        self.last: RewardResult | None = None

    async def score(self, episode: Any) -> float | None:
        if self.reward is None:
            return None
        if isinstance(self.reward, Reward):
            return self._graded(episode)
        conversation = episode.final()[0]  # the main conversation's, never a side call's
        value = self.reward(episode.task, [dict(m) for m in conversation])
        if inspect.isawaitable(value):
            value = await value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"the reward function returned {type(value).__name__}; it must "
                            "return a float")
        return float(value)

    def _graded(self, episode: Any) -> float:
        # the visible answer: reasoning and call syntax removed (what the policy answered)
        _, last, traj = episode.final()  # the main conversation's last answer and segment
        text = last.content if last is not None else ""
        answer = self.protocol.read(episode.task, [text])
        result = self.reward.score(episode.task, traj, answer)
        if traj is not None:
            traj.answer = None if answer is None else str(answer)
            traj.correct, traj.answered = result.correct, result.answered
            traj.reward_components = dict(result.components)
        return float(result.value)

    @staticmethod
    def credit(traj: Trajectory, reward: float | None) -> None:
        if reward is None:
            return
        traj.reward = float(reward)
        traj.credit(float(reward))
        traj.terminated = True
