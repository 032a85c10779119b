"""Math answer grading: extract the policy's final answer, check it against the gold answer.

* ``extract_final_answer(text, fallback=False)``: the policy's boxed final answer (a
  ``FinalAnswer``: the last box, with all boxes of the final answer); ``fallback`` also reads
  "final answer is ..." and the last ``$...$`` (evaluation only).
* ``last_boxed_answer(text)``: the last ``\\boxed{}``/``\\fbox{}`` as a plain string (the box
  scanner itself is ``tir_envs.formats.boxed``, below the data loaders that also read it).
* ``is_equivalent(pred, gold)``: Math-Verify in a process pool with hard timeouts and a cache.
* ``GraderPool``: the pool itself, for callers that want their own size, timeout, tolerance or
  async use.
* ``MathReward``: the outcome reward of the math-code recipes, with its components.
"""

from tir_envs.formats.boxed import last_boxed_answer
from tir_envs.rewards.math.extract import FinalAnswer, extract_final_answer
from tir_envs.rewards.math.normalize import DEFAULT_REL_TOL
from tir_envs.rewards.math.pool import Grade, GraderPool, default_pool, grade_many, is_equivalent
from tir_envs.rewards.math.reward import MathReward

__all__ = ["extract_final_answer", "last_boxed_answer", "FinalAnswer",
           "is_equivalent", "grade_many", "Grade", "GraderPool", "default_pool", "MathReward",
           "DEFAULT_REL_TOL"]
