"""How a policy's answer is read from its own text: one reader per way of writing an answer,
beside the tool-call formats.

The protocols own the reading (``Protocol.answer``, once per episode; ``Protocol.read`` for
saved action texts) and call these readers; the rewards only grade what they return.

* ``tir_envs.answers.math``: the boxed final answer (``extract_final_answer``, ``FinalAnswer``);
* ``tir_envs.answers.tags``: Search-R1's ``<answer>`` and SkyRL-SQL's ``<solution>``;
* ``tir_envs.answers.choice``: the one option letter a response chooses;
* ``tir_envs.answers.autotir``: AutoTIR's reading by domain;
* ``tir_envs.answers.response``: the final response without its reasoning.
"""
