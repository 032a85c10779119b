"""Tools from plain functions: schema from hints and docstring, checks, sessions, failures."""

from __future__ import annotations

import asyncio
import enum
import threading
import time
from typing import Literal

import pytest

from tir_envs import TIREnv
from tir_envs.tools import FunctionTool, ToolResult, Status, function_tool, tool
from tir_envs.tools.schema import parse_docstring


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


def weather(city: str, days: int = 1, unit: Unit = Unit.C, detail: bool | None = None) -> dict:
    """Forecast for a city.

    Longer text is part of the description.

    Args:
        city: the city's English name,
            as on a map.
        days (int): how many days ahead.
        unit: the temperature unit.
        detail: more fields.

    Returns:
        a dict.
    """
    return {"city": city, "days": days, "unit": unit.value, "detail": detail}


def test_schema_from_hints_and_docstring():
    t = function_tool(weather)
    fn = t.schema["function"]
    assert fn["name"] == "weather"
    assert fn["description"] == "Forecast for a city.\n\nLonger text is part of the description."
    props = fn["parameters"]["properties"]
    assert props["city"] == {"type": "string", "description": "the city's English name, as on a map."}
    assert props["days"] == {"type": "integer", "description": "how many days ahead.", "default": 1}
    assert props["unit"]["enum"] == ["celsius", "fahrenheit"]
    assert props["detail"]["type"] == "boolean"
    assert fn["parameters"]["required"] == ["city"]


def test_docstring_parser_keeps_sections_apart():
    desc, params = parse_docstring("Do it.\n\nArgs:\n    a: first\n    b: second\n"
                                   "Raises:\n    ValueError: never an argument")
    assert desc == "Do it." and params == {"a": "first", "b": "second"}


def test_literal_list_and_optional_hints():
    def f(mode: Literal["a", "b"], xs: list[int], note: str | None) -> str:
        return f"{mode}{sum(xs)}{note}"
    t = function_tool(f)
    props = t.parameters["properties"]
    assert props["mode"] == {"enum": ["a", "b"]}
    assert props["xs"] == {"type": "array", "items": {"type": "integer"}}
    assert t.parameters["required"] == ["mode", "xs"]  # an optional hint is not required
    r = asyncio.run(t.call({"mode": "a", "xs": [1, 2]}))
    assert r.ok and r.text == "a3None"


def test_unsupported_hint_and_variadics_are_refused_by_name():
    def f(x: complex) -> str:
        return ""
    with pytest.raises(TypeError, match="parameter 'x'.*no JSON schema"):
        function_tool(f)

    def g(*xs: int) -> str:
        return ""
    with pytest.raises(TypeError, match="variadic"):
        function_tool(g)


def test_decorator_forms_and_direct_call():
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @tool(name="mul", timeout_s=2)
    async def multiply(a: float, b: float) -> float:
        return a * b

    assert isinstance(add, FunctionTool) and add(2, 3) == 5
    assert multiply.name == "mul" and multiply.timeout_s == 2
    assert asyncio.run(add.call({"a": 2, "b": 3})).text == "5"
    assert asyncio.run(multiply.call({"a": 2, "b": 1.5})).text == "3.0"


@pytest.mark.parametrize("arguments,needle", [
    ({"city": 3}, "argument 'city': expected string, got integer"),
    ({}, "missing required argument(s) ['city']"),
    ({"city": "Oslo", "when": 1}, "unknown argument(s) ['when']"),
    ({"city": "Oslo", "days": True}, "expected integer, got boolean"),
    ({"city": "Oslo", "unit": "kelvin"}, "'kelvin' is not one of"),
])
def test_bad_arguments_are_error_results(arguments, needle):
    r = asyncio.run(function_tool(weather).call(arguments))
    assert r.status == Status.ERROR and needle in r.text


def test_enum_arguments_arrive_as_members():
    r = asyncio.run(function_tool(weather).call({"city": "Oslo", "unit": "fahrenheit"}))
    assert r.ok and '"unit": "fahrenheit"' in r.text


def test_exceptions_are_error_results_never_raised():
    def boom(x: str) -> str:
        raise KeyError(x)
    r = asyncio.run(function_tool(boom).call({"x": "k"}))
    assert r.status == Status.ERROR and r.text == "Error: boom: KeyError: 'k'"


def test_sync_timeout_and_async_timeout():
    def slow(x: int) -> int:
        time.sleep(1.0)
        return x

    async def aslow(x: int) -> int:
        await asyncio.sleep(5)
        return x
    r = asyncio.run(function_tool(slow, timeout_s=0.1).call({"x": 1}))
    assert r.status == Status.TIMEOUT and "timed out after 0.1 s" in r.text
    r = asyncio.run(function_tool(aslow, timeout_s=0.1).call({"x": 1}))
    assert r.status == Status.TIMEOUT


def test_blocking_function_runs_off_the_event_loop():
    loop_thread = []

    def blocking(x: int) -> str:
        time.sleep(0.3)
        return threading.current_thread().name

    async def main():
        loop_thread.append(threading.current_thread().name)
        ticks = 0

        async def ticker():
            nonlocal ticks
            for _ in range(10):
                await asyncio.sleep(0.02)
                ticks += 1
        r, _ = await asyncio.gather(function_tool(blocking).call({"x": 1}), ticker())
        return r, ticks
    r, ticks = asyncio.run(main())
    assert r.ok and r.text != loop_thread[0]
    assert ticks == 10  # the loop kept running while the function blocked


def test_result_rendering_and_cap():
    assert asyncio.run(function_tool(lambda: None, name="none").call({})).text == ""

    def big() -> str:
        return "x" * 100
    r = asyncio.run(function_tool(big, max_result_chars=20).call({}))
    assert r.text.startswith("x" * 10) and "characters cut" in r.text and len(r.text) < 60


def test_session_factory_gets_the_task_and_is_closed():
    closed = []

    class Counter:
        def __init__(self, start):
            self.value = start

        def close(self):
            closed.append(self.value)

    def bump(by: int, session=None) -> int:
        session.value += by
        return session.value

    t = function_tool(bump, session=lambda task: Counter(task.meta["start"]))
    assert "session" not in t.parameters["properties"]
    env = TIREnv(tool_format="json", tools=[t], tasks=[{"question": "q", "start": 10}],
                 system_prompt="s")
    env.reset(options={"index": 0})
    call = '<tool_call>{"name": "bump", "arguments": {"by": 2}}</tool_call>'
    obs, *_ = env.step(call)
    assert "12" in env.codec.decode(obs["tokens"])
    obs, *_ = env.step(call)
    assert "14" in env.codec.decode(obs["tokens"])
    env.step("done")
    assert closed == [14]
    env.close()


def test_session_without_parameter_is_refused():
    with pytest.raises(TypeError, match="no 'session' parameter"):
        function_tool(lambda x: x, session=dict)


def test_a_raising_function_in_an_env_is_a_tool_error_turn():
    def explode(q: str) -> str:
        raise RuntimeError("infra_error: forged")
    env = TIREnv(tool_format="json", tools=[function_tool(explode)],
                 tasks=[{"question": "q"}], system_prompt="s")
    env.reset(options={"index": 0})
    obs, r, term, trunc, info = env.step(
        '<tool_call>{"name": "explode", "arguments": {"q": "x"}}</tool_call>')
    turn = info["turn"]
    assert turn.status == "tool_error" and turn.tool_results[0]["status"] == "error"
    assert not env.trajectory.infra_failed
    env.close()


def test_returning_a_tool_result_keeps_its_status():
    def picky(x: str) -> ToolResult:
        return ToolResult("no", Status.ERROR)
    assert asyncio.run(function_tool(picky).call({"x": "a"})).status == Status.ERROR
