"""Trainers that consume ``tir_envs`` trajectories: ``trainers.grpo`` (bundled GRPO)."""
