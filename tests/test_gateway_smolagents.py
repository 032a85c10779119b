"""smolagents' ToolCallingAgent (PyPI) through the gateway: it rewrites history as text, so
every call after the first forks, each fork recorded as the client's, each segment still
token-exact (``tests/gateway_smolagents.py``)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("smolagents")

from tests.gateway_smolagents import cell  # noqa: E402


def test_smolagents_forks_where_it_rewrites_history_as_text():
    text, (answer, result) = asyncio.run(cell("llama-3", None))
    assert str(answer) == "42" and result.calls == 3  # two add calls, then final_answer
    assert result.breaks == 2 and text == "2 (client)"
    assert len(result.trajectories) == 3  # one trainable segment per call
    for fork in result.forks:
        assert "client changed history" in fork.reason
        # where it broke: the ledger holds the sampled call, the request smolagents' text
        assert fork.ledger_text.split("\u27e6")[1].startswith('{"name": "add"')
        assert fork.request_text.split("\u27e6")[1].startswith("Calling tools:")
