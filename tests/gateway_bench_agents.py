"""Agent programs the bench tests run by name (``tir-envs bench --agent MODULE:FN``)."""

from __future__ import annotations

from typing import Any

import openai


def question(task: Any) -> str:
    return task.question if hasattr(task, "question") else str(task["question"])


async def chat_answer_agent(task: Any, base_url: str, api_key: str) -> str:
    """One chat completion with the real ``openai`` SDK; returns a made-up claim of success
    (never read: the host grades the policy's completion)."""
    client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    try:
        reply = await client.chat.completions.create(
            model="tir-policy", messages=[{"role": "user", "content": question(task)}])
    finally:
        await client.close()
    return "\\boxed{CORRECT}" + (reply.choices[0].message.content or "")


async def crashing_agent(task: Any, base_url: str, api_key: str) -> str:
    raise RuntimeError("the agent's own bug")
