"""Math answer grading: extract the policy's final answer, check it against the gold answer.

* ``extract_answer(text)``: the last ``\\boxed{}``/``\\fbox{}`` of the policy's own text.
* ``is_equivalent(pred, gold)``: Math-Verify in a process pool with hard timeouts and a cache.
* ``GraderPool``: the pool itself, for callers that want their own size, timeout or async use.
* ``MathReward``: the outcome reward of the math-code recipes, with its components.
"""

from tir_envs.rewards.math.extract import extract_answer
from tir_envs.rewards.math.pool import Grade, GraderPool, default_pool, grade_many, is_equivalent
from tir_envs.rewards.math.reward import MathReward

__all__ = ["extract_answer", "is_equivalent", "grade_many", "Grade", "GraderPool",
           "default_pool", "MathReward"]
