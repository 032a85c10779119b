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
writes one input per call) are out of reach of those three.

Tools that take one main input (the shipped ``python``, ``sql`` and ``search``, and any tool
without a JSON schema) get ``mask.hostile_inputs``: inputs built to break the host around the
tool rather than the tool's own language -- for Python, an int past the int-to-text limit, a
result nested 10,000 deep, 2 MB of output, binary output; for SQL, a 2 MB blob, an
expression nested past SQLite's depth limit, control characters and overflowing numbers; for
search (and any other tool), a query as long as the generation budget allows, control
characters, query-parser syntax left open, brackets nested 500 deep.  Each is its own action
(one call per turn in every format), then a wrong answer.
"""

from __future__ import annotations

from typing import Any, Callable

from tir_envs.audit.context import ProbeContext
from tir_envs.audit.probes import Action, Piece, probe

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


#: characters no careful tool chokes on, written by the policy: NUL, the C0 controls, the
#: replacement character, a right-to-left override, the byte-order mark
_CONTROLS = "".join(chr(c) for c in range(32)) + "\ufffd\u202e\ufeff"
#: hostile main inputs per shipped tool (``None``: the query as long as the budget allows),
#: those that fail or fill the budget last (an env with fewer turns than inputs gets the rest
#: in its last call)
HOSTILE_INPUTS: dict[str, list[str | None]] = {
    "python": [
        "import sys\nsys.stdout.buffer.write(bytes(range(256)) * 256)",
        "print('x' * 2_000_000)",
        "x = []\nfor _ in range(10_000):\n    x = [x]\nprint(x)",
        "print(10 ** 5000)",
    ],
    "sql": [
        "SELECT randomblob(2000000)",
        "SELECT " + "(" * 1200 + "1" + ")" * 1200,
        "SELECT char(0, 27, 8238, 65279), x'00ff', 9223372036854775807 + 1, 1e999, -1e999",
        "SELECT printf('%.*c', 2000000, 'x')",
    ],
    "search": [_CONTROLS, '((((title:"open AND OR NOT ~^*?:\\/ [a TO',
               "(" * 500 + "x" + ")" * 500, None],
}
#: how the inputs left over for the last call are joined into one (none: SQL runs one
#: statement per call, so what does not fit is dropped)
_JOIN = {"python": "\n", "sql": None, "search": " "}


def _as_long_as_allowed(ctx: ProbeContext) -> str:
    """A query filling half of what one generation may write (about a token a word): the
    other half for what is joined to it."""
    words = max(200, (ctx.max_new_tokens or 1000) // 2)
    return " ".join(["capital"] * words)


def _calls(ctx: ProbeContext, tool: str) -> list[Piece]:
    """One action per hostile input of ``tool``, within the env's turns (one is left for the
    answer): the inputs past them joined into the last call."""
    inputs = list(HOSTILE_INPUTS.get(tool, HOSTILE_INPUTS["search"]))
    turns = getattr(ctx.env, "max_turns", None) or len(inputs) + 1
    slots = max(1, min(len(inputs), turns - 1))
    join = _JOIN.get(tool, " ")
    groups = [[body] for body in inputs[:slots - 1]]
    groups.append(inputs[slots - 1:] if join is not None else [inputs[slots - 1]])

    def piece(group: list[str | None]) -> Piece:
        return lambda c: Action(c.call(tool, (join or "").join(
            _as_long_as_allowed(c) if body is None else body for body in group)))
    return [piece(group) for group in groups]


@probe("mask.hostile_inputs", "mask",
       "every single-input tool (python, sql, search, any without a JSON schema) given inputs "
       "that break careless hosts (huge ints, deep nesting, huge and binary output or "
       "queries, open query syntax), one per action; then a wrong answer")
def hostile_inputs(ctx):
    script: list[Piece] = []
    for name in ctx.tools:
        params = getattr(ctx.env.tools[name], "parameters", None)
        if isinstance(params, dict) and params.get("properties"):
            continue  # JSON arguments: the probes above
        script += _calls(ctx, name)
    return script + [ctx.answer(ctx.wrong[0])] if script else None
