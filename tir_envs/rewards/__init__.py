"""Rewards and graders: math answers, QA exact match / F1, SQL execution match."""

from tir_envs.rewards.base import FunctionReward, NoReward, Reward, RewardResult, as_reward
from tir_envs.rewards.terms import RewardTerms

__all__ = ["FunctionReward", "NoReward", "Reward", "RewardResult", "RewardTerms", "as_reward"]
