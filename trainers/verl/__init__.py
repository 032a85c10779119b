"""verl adapter: train any ``tir/*`` env with verl's agent-loop rollout (verl 0.9.1).

``agent_loop.TIRAgentLoop`` is the agent loop (named ``tir_agent`` in ``agent_loop.yaml``),
``policy.VerlServerPolicy`` verl's server manager as a policy, ``dataset`` the Parquet writer,
``configs/`` the seed-paper settings.  See docs/verl.md.
"""
