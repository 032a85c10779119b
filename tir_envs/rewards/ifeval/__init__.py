"""IFEval scoring (Zhou et al. 2023): the 25 verifiable instruction types, strict and loose
verdicts, IFEval's four accuracies, AutoTIR's soft accuracy, and an episode reward (IFScore).

See docs/ifeval.md for the definitions and the measured agreement with the reference.
"""

from tir_envs.data.ifeval.arguments import INSTRUCTION_IDS, RELATIONS, validate_kwargs
from tir_envs.rewards.ifeval.evaluate import (IFEvalAccuracy, IFEvalVerdict, aggregate,
                                              loose_variants, score_response)
from tir_envs.rewards.ifeval.instructions import INSTRUCTIONS, check_instruction
from tir_envs.rewards.ifeval.reward import IFEvalReward, task_instructions

__all__ = ["INSTRUCTION_IDS", "INSTRUCTIONS", "RELATIONS", "IFEvalAccuracy", "IFEvalReward",
           "IFEvalVerdict", "aggregate", "check_instruction", "loose_variants", "score_response",
           "task_instructions", "validate_kwargs"]
