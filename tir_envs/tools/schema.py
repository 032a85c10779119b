"""JSON schemas of Python functions, from their type hints and docstrings, and argument checks.

A researcher's function becomes a tool the model calls by name with JSON arguments; the schema
the model reads (in the system prompt, or a chat template's ``tools=``) and the check its
arguments pass before the function runs come from the same signature, so they never disagree.

Supported hints: ``str``, ``int``, ``float``, ``bool``, ``list[X]``, ``tuple[X, ...]``,
``dict[str, X]``, ``Literal[...]``, ``Enum`` subclasses, ``X | None`` (optional), and no hint
(any JSON value).  Parameter descriptions come from a Google-style ``Args:`` section (or
``Arguments:``/``Parameters:``); the function's description is the docstring before it.
"""

from __future__ import annotations

import enum
import inspect
import re
import types
import typing
from typing import Any, Callable, Literal, Union

#: parameters filled by the env, never by the model (and absent from the schema)
INJECTED = ("session",)

_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?)"
                      r"\s*:\s*$")
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """``(description, {parameter: description})`` from a Google-style docstring."""
    lines = inspect.cleandoc(doc or "").splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    section, current, indent = None, None, None
    for line in lines:
        head = _SECTION.match(line)
        if head:
            section, current, indent = head.group(1), None, None
            continue
        if section is None:
            summary.append(line)
            continue
        if section not in ("Args", "Arguments", "Parameters") or not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        entry = _ARG_LINE.match(line.strip())
        if entry and (indent is None or depth <= indent):
            indent = depth
            current = entry.group(1).lstrip("*")
            params[current] = entry.group(3).strip()
        elif current is not None:  # a continuation line of the current parameter
            params[current] = (params[current] + " " + line.strip()).strip()
    return "\n".join(summary).strip(), params


def json_type(hint: Any) -> tuple[dict[str, Any], bool]:
    """The JSON schema of one type hint, and whether ``None`` is allowed."""
    if hint is inspect.Parameter.empty or hint is Any:
        return {}, False
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        optional = len(rest) < len(args)
        if len(rest) == 1:
            return json_type(rest[0])[0], optional
        return {"anyOf": [json_type(a)[0] for a in rest]}, optional
    if origin is Literal:
        return {"enum": list(args)}, False
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": [m.value for m in hint]}, False
    if hint is bool:
        return {"type": "boolean"}, False
    if hint is int:
        return {"type": "integer"}, False
    if hint is float:
        return {"type": "number"}, False
    if hint is str:
        return {"type": "string"}, False
    if hint in (list, tuple, set) or origin in (list, tuple, set, frozenset):
        out: dict[str, Any] = {"type": "array"}
        item = args[0] if args and (origin is not tuple or len(args) == 2 and
                                    args[1] is Ellipsis) else None
        if item is not None:
            out["items"] = json_type(item)[0]
        return out, False
    if hint is dict or origin is dict:
        out = {"type": "object"}
        if len(args) == 2:
            out["additionalProperties"] = json_type(args[1])[0]
        return out, False
    raise TypeError(f"type hint {hint!r} has no JSON schema; use str, int, float, bool, "
                    "list[...], dict[str, ...], Literal[...], an Enum, or X | None")


def function_schema(fn: Callable[..., Any], name: str | None = None,
                    description: str | None = None) -> dict[str, Any]:
    """The OpenAI/Hermes function schema of ``fn``:
    ``{"type": "function", "function": {"name", "description", "parameters"}}``."""
    doc, param_docs = parse_docstring(inspect.getdoc(fn))
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:  # noqa: BLE001 - a forward reference that cannot be resolved
        raise TypeError(f"the type hints of {fn_name(fn)} cannot be resolved ({exc}); "
                        "import the types the hints name in the function's module") from exc
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in inspect.signature(fn).parameters.values():
        if param.name in INJECTED:
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise TypeError(f"{fn_name(fn)}: parameter {param.name!r} is positional-only or "
                            "variadic; a tool's arguments arrive by name, so give each its "
                            "own named parameter")
        try:
            schema, optional = json_type(hints.get(param.name, param.annotation))
        except TypeError as exc:
            raise TypeError(f"{fn_name(fn)}: parameter {param.name!r}: {exc}") from None
        if param.name in param_docs:
            schema = {**schema, "description": param_docs[param.name]}
        if param.default is not param.empty:
            if _json_value(param.default):
                schema = {**schema, "default": param.default}
        elif not optional:
            required.append(param.name)
        properties[param.name] = schema
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    return {"type": "function", "function": {
        "name": name or fn.__name__,
        "description": description if description is not None else (doc or fn.__name__),
        "parameters": parameters}}


def check_arguments(arguments: dict[str, Any], parameters: dict[str, Any],
                    allow_unknown: bool = False) -> str | None:
    """Why ``arguments`` do not fit ``parameters`` (a JSON object schema), or ``None``.

    The checks a model's call needs before a function runs: unknown (unless
    ``allow_unknown``) and missing names, and each value's JSON type (an ``integer`` is not a
    ``bool``; a ``number`` may be an int).  Keywords this check does not know (``$ref``,
    ``pattern``...) are left to the tool: the check never refuses what a schema allows."""
    if not isinstance(arguments, dict):
        return f"the arguments must be a JSON object, got {_json_name(arguments)}"
    props = parameters.get("properties", {}) if isinstance(parameters, dict) else {}
    props = props if isinstance(props, dict) else {}
    unknown = sorted(set(arguments) - set(props))
    if unknown and not allow_unknown:
        return (f"unknown argument(s) {unknown}; the parameters are "
                f"{sorted(props) or 'none'}")
    missing = [k for k in parameters.get("required", []) if k not in arguments]
    if missing:
        return f"missing required argument(s) {missing}"
    for key, value in arguments.items():
        if not isinstance(props.get(key), dict):
            continue
        problem = _check_value(value, props[key])
        if problem:
            return f"argument {key!r}: {problem}"
    return None


_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def _check_value(value: Any, schema: dict[str, Any]) -> str | None:
    if value is None and "default" in schema and schema["default"] is None:
        return None
    if isinstance(schema.get("anyOf"), list) and schema["anyOf"]:
        if all(_check_value(value, s) for s in schema["anyOf"] if isinstance(s, dict)):
            return f"{value!r} matches none of the allowed types"
        return None
    if isinstance(schema.get("enum"), list) and value not in schema["enum"]:
        return f"{value!r} is not one of {schema['enum']}"
    kind = schema.get("type")
    kinds = [k for k in (kind if isinstance(kind, list) else [kind]) if k in _JSON_TYPES]
    if kinds and not any(_JSON_TYPES[k](value) for k in kinds):
        return f"expected {' or '.join(kinds)}, got {_json_name(value)} {_short(value)}"
    if kind == "array" and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            problem = _check_value(item, schema["items"])
            if problem:
                return f"item {i}: {problem}"
    return None


def _json_name(value: Any) -> str:
    for name, test in _JSON_TYPES.items():
        if test(value):
            return name
    return type(value).__name__


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an int past the text limit, a deep structure
        return f"({type(value).__name__})"
    return text if len(text) <= 40 else text[:37] + "..."


def _json_value(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool, list, dict))


def fn_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)
