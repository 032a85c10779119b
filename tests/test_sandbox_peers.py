"""The peer executors of ``benchmarks/perf/sandbox.py`` (issue 29 item 7): a peer call counts
only when it printed ``1``, a peer whose calls fail is reported failing and left out of the
fastest, and an absent one is ``{"installed": false}`` and out of the goal, never an error."""

from __future__ import annotations

import asyncio
import os
import sys
from types import SimpleNamespace

from tir_envs.bench.perf import sandbox

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
GOOD = sandbox.Peer("good", (sys.executable, "-c"), ENV)
# ``python -c "print(2)" CODE``: the code becomes an argument, the call prints 2.
WRONG = sandbox.Peer("wrong", (sys.executable, "-c", "print(2)"), ENV)
ABSENT = sandbox.Peer("absent", ("no-such-executor-for-tir-envs", "-c"), ENV)


class OneShotTool:
    """Stands in for ``PythonTool(stateful=False)``: these tests check the section's
    bookkeeping; the real stateless calls run in ``make perf-smoke``."""

    async def call(self, args: dict, session=None) -> SimpleNamespace:
        await asyncio.sleep(0.001)
        return SimpleNamespace(ok=True, text="1")


def test_a_peer_call_counts_only_when_it_printed_1():
    assert asyncio.run(sandbox.peer_call(GOOD))
    assert not asyncio.run(sandbox.peer_call(WRONG))


def test_failing_and_absent_peers_are_reported_not_ranked(monkeypatch):
    monkeypatch.setattr(sandbox, "peers", lambda: [GOOD, WRONG, ABSENT])
    out = asyncio.run(sandbox.peers_vs_stateless(OneShotTool(), 0.2, 64))
    assert out["absent"] == {"installed": False}
    assert out["wrong"]["failing"] and out["wrong"]["failed_calls"] == out["wrong"]["calls"] > 0
    assert out["wrong"]["16"]["runs_per_s"] == 0
    assert not out["good"]["failing"] and out["good"]["failed_calls"] == 0
    assert set(out["fastest_peer"].values()) == {"good"}
    assert out["stateless_over_fastest_peer"] == {k: out["good"][k]["ratio"]
                                                  for k in ("1", "16", "64")}
    assert sandbox.peer_goal(out) is None  # an installed peer failed: not measured


def test_the_goal_leaves_absent_peers_out(monkeypatch):
    monkeypatch.setattr(sandbox, "peers", lambda: [GOOD, ABSENT])
    out = asyncio.run(sandbox.peers_vs_stateless(OneShotTool(), 0.2, 64))
    ratios = out["stateless_over_fastest_peer"].values()
    assert sandbox.peer_goal(out) is all(r >= 2 for r in ratios)
