"""Probes that send tools hostile arguments: can a policy choose its own mask?

A trainer drops an episode whose status is the host's (``infra_error``, a crash out of the env,
the deadline).  If a policy can reach that status on purpose, it can hide any episode it would
lose: a mask it chose.  These probes call each of the env's tools with arguments built from
the tool's own schema to break it, where a careless tool breaks -- an integer of 2,201 digits
for every integer (``multiply`` then returns one past Python's int-to-text limit), a list
nested 60 deep for every argument (a recursive renderer or validator overflows), a value of
the wrong JSON type for every argument -- all in one action, then a wrong answer.  An env
holds when every such call is the call's own error (``tool_error``) or an ordinary result;
an episode masked by any of them is ``MASKS``.  Tools with no JSON arguments (a format that
writes one input per call) are out of reach: the probes do not apply there.
"""

from __future__ import annotations

from typing import Any, Callable

from tir_envs.audit.context import ProbeContext
from tir_envs.audit.probes import Action, probe

#: 2,201 digits: within the JSON reader's 4,300-digit limit, so it reaches the tool; a product
#: of two has 4,401 or more, past Python's int-to-text limit
HUGE_INT = int("7" * 2201)
#: levels of nesting: within the JSON reader's 64, past what a careless renderer allows
DEEP = 60
_BENIGN = {"integer": 1, "number": 1.5, "string": "1", "boolean": True, "array": [],
           "object": {}, "null": None}
_WRONG = {"integer": "x", "number": "x", "string": {"a": [1]}, "boolean": "yes", "array": 1,
          "object": "x", "null": 1}


def _nest(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def _kind(schema: Any) -> str | None:
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return kind if kind in _BENIGN else None


def _huge(schema: Any) -> Any:
    kind = _kind(schema)
    return HUGE_INT if kind in ("integer", "number", None) else _BENIGN[kind]


def _deep(schema: Any) -> Any:
    return _nest(DEEP)


def _wrong(schema: Any) -> Any:
    kind = _kind(schema)
    return _WRONG[kind] if kind else _nest(DEEP)


def _hostile_calls(ctx: ProbeContext, value: Callable[[Any], Any]) -> list[Action] | None:
    """One action calling every tool with JSON arguments, each set by ``value(schema)``."""
    calls = []
    for name in ctx.tools:
        params = getattr(ctx.env.tools[name], "parameters", None)
        props = params.get("properties") if isinstance(params, dict) else None
        if not isinstance(props, dict) or not props:
            continue
        call = ctx.call_with(name, {key: value(schema) for key, schema in props.items()})
        if call is not None:
            calls.append(call)
    if not calls:
        return None
    return [Action(ctx.lead() + "\n".join(calls)), ctx.answer(ctx.wrong[0])]


@probe("mask.huge_ints", "mask",
       "every tool called with a 2,201-digit integer for each number argument (a product "
       "past Python's int-to-text limit); then a wrong answer")
def huge_ints(ctx):
    return _hostile_calls(ctx, _huge)


@probe("mask.deep_nesting", "mask",
       "every tool called with a list nested 60 deep for each argument; then a wrong answer")
def deep_nesting(ctx):
    return _hostile_calls(ctx, _deep)


@probe("mask.wrong_types", "mask",
       "every tool called with a value of the wrong JSON type for each argument; then a wrong "
       "answer")
def wrong_types(ctx):
    return _hostile_calls(ctx, _wrong)
