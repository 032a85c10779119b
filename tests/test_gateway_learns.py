"""An OpenAI Agents SDK agent learns through the gateway with the bundled GRPO trainer, on CPU.

``trainers/grpo/agents_math.py``: ``Runner`` + a ``calculator`` function tool, its model an
``OpenAIChatCompletionsModel`` pointed at the gateway, over a tiny random Qwen2 (8-token
vocabulary); the host's reward counts an answer only after a calculator call the policy made.
A random policy earns ~1/64; the test trains (seeded) until a 3-step mean reward reaches 0.2,
13x chance (the reference run, docs/gateway_agents_math_curve.json, passed 0.3 at step 23 and
reached 0.97 at step 28; two test runs on a loaded machine peaked at 0.30 by step 18 and 0.29
within 30 steps: the agents' concurrency makes the runs differ, so the goal leaves room), and
checks that every episode went through the SDK without a prefix break.
"""

from __future__ import annotations

import pytest

pytest.importorskip("agents")
pytest.importorskip("torch")

from tir_envs.trainers.grpo.agents_math import train  # noqa: E402

MAX_STEPS = 30
GOAL = 0.2


def window(history, n=3):
    return [sum(h["reward/mean"] for h in history[i - n:i]) / n
            for i in range(n, len(history) + 1)]


def test_the_agents_sdk_agent_learns_to_use_its_calculator(tmp_path):
    history, stats = train(MAX_STEPS, [f"train.output_dir={tmp_path}"], stop_at=GOAL,
                           stop_window=3)
    rewards = [round(h["reward/mean"], 3) for h in history]
    assert sum(rewards[:2]) / 2 < 0.1, f"the untrained policy should be near 0: {rewards}"
    assert max(window(history)) >= GOAL, f"no 3-step mean reached {GOAL}: {rewards}"
    assert sum(s["episodes"] for s in stats) == 64 * len(history)
    assert sum(s["breaks"] for s in stats) == 0  # ChatML + Hermes: the SDK keeps the prefix
