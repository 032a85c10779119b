"""``tir-envs audit``'s hostile-argument probes: a policy that breaks a tool on purpose must
not reach a status the trainer masks (issue 43: ``multiply`` with two 2,201-digit ints)."""

from __future__ import annotations

import json

from tests import hostile_tools as hostile
from tir_envs.audit import HELD, MASKS, PROBES, audit
from tir_envs.tools import Tool, ToolResult

TASKS = [{"question": "What is 6 times 7?", "answer": "42"},
         {"question": "What is 3 times 5?", "answer": "15"}]
MASK_PROBES = [p for p in PROBES if p.family == "mask" and p.name != "mask.hostile_inputs"]


class CarelessMultiply(Tool):
    """A hand-written tool that lets the host's conversion fail (as function tools did)."""

    name = "multiply"
    parameters = {"type": "object", "properties": {"a": {"type": "integer"},
                                                   "b": {"type": "integer"}}}
    schema = {"type": "function", "function": {"name": "multiply", "description": "a * b",
                                               "parameters": parameters}}

    async def call(self, arguments, session=None):
        return ToolResult(json.dumps(arguments["a"] * arguments["b"]))


def test_the_mask_probes_exist_and_hold_on_the_multiply_function_tool():
    assert {p.name for p in PROBES if p.family == "mask"} == {
        "mask.huge_ints", "mask.deep_nesting", "mask.wrong_types", "mask.hostile_inputs"}
    report = audit("tir/ToolUse-v0", env_kwargs={"tasks": TASKS, "tools": [hostile.multiply]},
                   tasks=1, probes=MASK_PROBES)
    assert all(p.verdict == HELD for p in report.probes), report.to_markdown()
    assert report.ok


def test_a_tool_that_breaks_on_a_huge_product_is_found():
    report = audit("tir/ToolUse-v0", env_kwargs={"tasks": TASKS, "tools": [CarelessMultiply()]},
                   tasks=1, probes=MASK_PROBES)
    assert report.verdicts()["mask.huge_ints"] == MASKS and not report.ok


class CarelessLookup(Tool):
    """A single-input tool (no JSON schema, like the shipped search) whose backend takes
    ASCII only and lets its error out: the host's ``infra_error``, which a policy can choose."""

    name = "lookup"
    description = "Look a word up."

    async def call(self, arguments, session=None):
        query = next((v for v in arguments.values() if isinstance(v, str)), "")
        return ToolResult(f"found {len(query.encode('ascii'))} bytes")


def test_hostile_inputs_reach_single_input_tools_and_find_a_careless_one():
    """``mask.hostile_inputs`` calls tools that take one main input (the shipped python, sql
    and search hold against it in tests/test_audit.py) and finds one a policy can make fail
    as the host's fault."""
    probe = [p for p in PROBES if p.name == "mask.hostile_inputs"]
    report = audit("tir/ToolUse-v0", env_kwargs={"tasks": TASKS, "tools": [CarelessLookup()]},
                   tasks=1, probes=probe)
    assert report.verdicts()["mask.hostile_inputs"] == MASKS and not report.ok
    report = audit("tir/ToolUse-v0", env_kwargs={"tasks": TASKS, "tools": [hostile.multiply]},
                   tasks=1, probes=probe)
    assert report.verdicts()["mask.hostile_inputs"] == "N/A"  # JSON arguments: the others'
