"""smolagents' ``ToolCallingAgent`` through the gateway: its row of the conformance table.

smolagents (PyPI, 1.26) calls ``/v1/chat/completions`` with ``tool_choice: required`` and
``stop`` sequences, and rewrites history as text: its own earlier calls come back as an
assistant message "Calling tools: [...]" and results as a user "Observation:" message, never
as ``tool_calls`` / ``role: tool``.  So whatever the family, the second call's render cannot
extend the ledger (the assistant turn the policy sampled is not what the client sent back):
the episode forks at every call after the first, and each fork is recorded as the client's.
The episode ends when the policy calls smolagents' ``final_answer`` tool.

``python -m tests.gateway_smolagents`` prints the row for every family of the table.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.gateway_conformance import FAMILIES
from tests.gateway_helpers import ToolLoopPolicy, check_ledger, tool_add
from tests.test_gateway import make

QUESTION = "Add the numbers, then answer."


class FinalAnswerPolicy(ToolLoopPolicy):
    """``ToolLoopPolicy`` that ends by calling ``final_answer`` (smolagents' way to answer)."""

    def action(self, context: str) -> str:
        if context.count("tool-said-") < self.calls:
            return super().action(context)
        text = self.renderer.render_calls([("final_answer", {"answer": "42"})])
        return text if text.endswith(self.call_end) else text + self.call_end


async def smolagents_agent(base_url: str, api_key: str) -> Any:
    """A ``ToolCallingAgent`` with one ``add`` tool, its model pointed at the gateway."""
    from smolagents import OpenAIServerModel, ToolCallingAgent, tool

    @tool
    def add(a: int, b: int) -> str:
        """Add two integers.

        Args:
            a: the first integer.
            b: the second integer.
        """
        return tool_add(a, b)

    model = OpenAIServerModel(model_id="tir-policy", api_base=base_url, api_key=api_key,
                              client_kwargs={"max_retries": 0})
    agent = ToolCallingAgent(tools=[add], model=model, max_steps=5, verbosity_level=0)
    # smolagents is synchronous: run it off the loop that serves the gateway
    return await asyncio.to_thread(agent.run, QUESTION)


async def cell(family: str, thinking: str | None) -> tuple[str, Any]:
    gw, policy = make(family, thinking)
    policy.__class__ = FinalAnswerPolicy
    async with gw:
        url, key = gw.open_episode()
        answer = await smolagents_agent(url, key)
        result = await gw.finish(key)
    check_ledger(result, policy.seen)
    kinds = sorted({"client" if "client changed" in f.reason else "template"
                    for f in result.forks})
    return (f"{result.breaks} ({', '.join(kinds)})" if result.breaks else "-"), (answer, result)


def main() -> None:
    for family, thinking in FAMILIES:
        label = family + (f" thinking {thinking}" if thinking else "")
        text, (answer, result) = asyncio.run(cell(family, thinking))
        print(f"| {label} | {text} | calls {result.calls}, answer {answer!r}", flush=True)


if __name__ == "__main__":
    main()
