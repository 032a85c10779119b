"""The conformance table of docs/gateway.md: which client breaks which family's prefix.

``python -m tests.gateway_conformance`` runs every client of ``tests.gateway_agents`` on every
family the gateway serves (three tool-calling turns each, ``ToolLoopPolicy``) and prints,
per cell, the forks the episode recorded and why (their cause; ``python -m
tests.gateway_conformance gpt-oss mistral`` prints only the families named) (``-`` none: every call extended the ledger).
"""

from __future__ import annotations

import asyncio

from tests.gateway_agents import CLIENTS
from tests.gateway_helpers import check_ledger
from tests.test_gateway import make

CAUSES = {"client_rewrite": "client", "template_rule": "template"}
FAMILIES = [("qwen3", "on"), ("qwen3", "off"), ("llama-3", None), ("deepseek-v3", None),
            ("deepseek-r1", None), ("glm-4.5", "on"), ("glm-4.5", "off"), ("gpt-oss", None),
            ("mistral", None)]


async def cell_results(family: str, thinking: str | None) -> dict[str, str]:
    gw, policy = make(family, thinking)
    out = {}
    async with gw:
        for name, agent in CLIENTS.items():
            url, key = gw.open_episode()
            first = len(policy.seen)
            await agent(url, key)
            result = await gw.finish(key)
            check_ledger(result, policy.seen[first:])
            kinds = sorted({CAUSES[f.cause] for f in result.forks if f.rewrite})
            out[name] = f"{result.breaks} ({', '.join(kinds)})" if result.breaks else "-"
    return out


def main(families: list = FAMILIES) -> None:
    names = list(CLIENTS)
    print("| family | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for family, thinking in families:
        row = asyncio.run(cell_results(family, thinking))
        label = family + (f" thinking {thinking}" if thinking else "")
        print(f"| {label} | " + " | ".join(row[n] for n in names) + " |", flush=True)


if __name__ == "__main__":
    import sys
    main([f for f in FAMILIES if f[0] in sys.argv[1:]] or FAMILIES)
