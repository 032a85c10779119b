"""Judge rewards: a rubric and an LLM judge, pointwise or grouped, as a reward part.

A part of its own, above ``tir_envs.rewards`` and ``tir_envs.rollout``: the reward reaches its
judge model through the policy backends, which plain rewards never import.

See ``docs/judge.md``.  ``JudgeClient`` reaches the judge model through any policy backend;
``JudgeReward`` is the reward part; ``Rubric`` says what is graded; ``GullibleJudge`` is the
worst judge (it obeys instructions it reads outside data), for tests and the audit.
"""

from tir_envs.judge.client import JudgeClient, Judgement, JudgeStats
from tir_envs.judge.length import LengthNorm
from tir_envs.judge.prompt import NAIVE, SAFE, PromptStyle
from tir_envs.judge.reward import JudgeReward
from tir_envs.judge.rubric import Criterion, Rubric
from tir_envs.judge.verdict import VerdictError, parse_verdict

__all__ = ["Criterion", "JudgeClient", "JudgeReward", "JudgeStats", "Judgement", "LengthNorm",
           "NAIVE", "PromptStyle", "Rubric", "SAFE", "VerdictError", "parse_verdict"]
