"""Trainers that consume ``tir_envs`` trajectories: ``tir_envs.trainers.grpo`` (bundled GRPO)."""
