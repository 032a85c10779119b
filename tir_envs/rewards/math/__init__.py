"""Math answer grading: check the policy's final answer against the gold answer.

The answer itself is read by the protocol (``tir_envs.answers.math.extract_final_answer``):
a grader never reads action texts.

* ``last_boxed_answer(text)``: the last ``\\boxed{}``/``\\fbox{}`` as a plain string (the box
  scanner itself is ``tir_envs.formats.boxed``, below the data loaders that also read it).
* ``is_equivalent(pred, gold)``: Math-Verify in a process pool with hard timeouts and a cache.
* ``GraderPool``: the pool itself, for callers that want their own size, timeout, tolerance or
  async use.
* ``MathReward``: the outcome reward of the math-code recipes, with its components.
"""

from tir_envs.formats.boxed import last_boxed_answer
from tir_envs.rewards.math.normalize import DEFAULT_REL_TOL
from tir_envs.rewards.math.pool import Grade, GraderPool, default_pool, grade_many, is_equivalent
from tir_envs.rewards.math.reward import MathReward

__all__ = ["last_boxed_answer",
           "is_equivalent", "grade_many", "Grade", "GraderPool", "default_pool", "MathReward",
           "DEFAULT_REL_TOL"]
