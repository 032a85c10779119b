"""Rewards and graders: math answers, QA exact match / F1, SQL execution match."""

from tir_envs.rewards.base import FunctionReward, NoReward, Reward, RewardResult, as_reward
from tir_envs.rewards.rubric import Rubric

__all__ = ["FunctionReward", "NoReward", "Reward", "RewardResult", "Rubric", "as_reward"]
