"""Rollout: policies and the async engine that drives many episodes."""
