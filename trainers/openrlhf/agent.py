"""The file to give OpenRLHF: ``--train.agent_func_path trainers/openrlhf/agent.py``.

OpenRLHF loads this file by path and calls ``AgentExecutor()``; the env it serves comes from
``TIR_ENV_ID`` + ``TIR_ENV_KWARGS`` (JSON) or ``TIR_ENV_CONFIG`` (YAML), see docs/openrlhf.md.
"""

from tir_envs.trainers.openrlhf.executor import TIRAgentExecutor as AgentExecutor
from tir_envs.trainers.openrlhf.executor import TIRAgentInstance as AgentInstance

__all__ = ["AgentExecutor", "AgentInstance"]
