"""TRL adapter: train any ``tir/*`` env with TRL's ``GRPOTrainer`` (TRL 1.16.0).

``rollout.make_rollout_func`` is the ``rollout_func``, ``rollout.env_reward`` the reward
function, ``environment.make_environment_factory`` the ``environment_factory`` class, ``vllm.TRLVLLMPolicy`` TRL's vLLM as a policy, ``dataset`` the dataset writer,
``train`` the example script.  See docs/trl.md.
"""
