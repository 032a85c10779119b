"""The conformance table of docs/gateway.md: which client breaks which family's prefix.

``python -m tests.gateway_conformance`` runs every client of ``tests.gateway_agents`` on every
family with a serving template (three tool-calling turns each, ``ToolLoopPolicy``) and prints,
per cell, the forks the episode recorded and why (``-`` none: every call extended the ledger).
"""

from __future__ import annotations

import asyncio

from tests.gateway_agents import CLIENTS
from tests.gateway_helpers import check_ledger
from tests.test_gateway import make

FAMILIES = [("qwen3", "on"), ("qwen3", "off"), ("llama-3", None), ("deepseek-v3", None),
            ("deepseek-r1", None), ("glm-4.5", "on"), ("glm-4.5", "off")]


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
            why = {"client": "client", "template": "template"}
            kinds = sorted({why["client"] if "client changed" in f.reason else why["template"]
                            for f in result.forks})
            out[name] = f"{result.breaks} ({', '.join(kinds)})" if result.breaks else "-"
    return out


def main() -> None:
    names = list(CLIENTS)
    print("| family | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for family, thinking in FAMILIES:
        row = asyncio.run(cell_results(family, thinking))
        label = family + (f" thinking {thinking}" if thinking else "")
        print(f"| {label} | " + " | ".join(row[n] for n in names) + " |", flush=True)


if __name__ == "__main__":
    main()
