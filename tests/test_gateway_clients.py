"""Real agent libraries through the gateway: the OpenAI Agents SDK (Responses and chat
completions models), LangGraph's ReAct agent, the ``openai`` Responses API and the
``anthropic`` SDK with thinking, each streaming where it does by default.

For each, on Qwen3 with thinking (the family whose prefix clients break most), on Llama 3
(no reasoning; a stand-in vocabulary and the real one from quicktok-v1), on gpt-oss (harmony,
through openai-harmony) and on Mistral (mistral-common): the agent finishes, the ledger
invariant holds at every call, and the episode forks exactly where the client rewrote history.  The measured table is in docs/gateway.md
(``python -m tests.gateway_conformance`` prints it).
"""

from __future__ import annotations

import asyncio

import pytest

from tests.gateway_agents import CLIENTS
from tests.gateway_helpers import ANSWER, check_ledger
from tests.test_gateway import make

#: clients that drop an assistant's reasoning_content when they send history back
DROPS_REASONING = {"agents-sdk-chat", "langgraph"}


@pytest.mark.parametrize("family,thinking", [("qwen3", "on"), ("llama-3", None),
                                             ("llama-3-real", None), ("gpt-oss", None),
                                             ("mistral", None)])
def test_real_clients_keep_the_prefix_or_fork_where_they_rewrote_it(family, thinking):
    async def main():
        gw, policy = make(family, thinking)
        out = {}
        async with gw:
            for name, agent in CLIENTS.items():
                url, key = gw.open_episode()
                first = len(policy.seen)
                answer = await agent(url, key)
                out[name] = (answer, await gw.finish(key), policy.seen[first:])
        return out
    for name, (answer, result, seen) in asyncio.run(main()).items():
        assert answer == ANSWER, name
        assert result.calls == 3, name
        check_ledger(result, seen)
        reasons = thinking == "on" or family == "gpt-oss"
        forks = 2 if reasons and name in DROPS_REASONING else 0
        assert result.breaks == forks, (name, [f.to_dict() for f in result.forks])
        for fork in result.forks:
            assert fork.cause == "client_rewrite" and "client changed history" in fork.reason
            # what the client dropped: the reasoning (Qwen3's <think>, harmony's analysis)
            opener = "<think>" if family == "qwen3" else "<|channel|>analysis<|message|>"
            assert fork.ledger_text.split("⟦")[1].startswith(opener)
