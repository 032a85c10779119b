"""A function tool's return value as the text the model reads, measured before it is converted.

``json.dumps`` and ``str`` can fail or take unbounded time on what a function returns when a
policy chose its arguments: an int past Python's int-to-text limit (a 2,201-digit product)
raises, one of millions of digits takes seconds (the conversion is quadratic), a structure
nested 5,000 deep exceeds the recursion limit, a list of ten million items is built into
one string only to be cut.  ``render`` walks the value without recursion, writes JSON as
``json.dumps(value, ensure_ascii=False, default=str)`` would, stops writing once the text
passes its budget, and sizes an int before converting it.  What cannot become text raises
``Unrenderable`` with a short reason: the call's own error, never the host's.
"""

from __future__ import annotations

import json
import math
from typing import Any

#: nesting levels a result may have (JSON decoders refuse far less; a deeper value is an error)
MAX_DEPTH = 100
_LOG10_2 = math.log10(2)


class Unrenderable(ValueError):
    """The value cannot become text (too deep, an int too long, a ``__str__`` that fails)."""


def render(value: Any, budget: int) -> str:
    """The text of ``value``: strings as they are, ``None`` as nothing, anything else as JSON
    (objects JSON has no form for: their ``str``).  Writing stops once the text passes
    ``budget`` characters (the caller cuts it to its limit, head and tail)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if not isinstance(value, (dict, list, tuple, int, float)):
        return _str(value, budget)
    out: list[str] = []
    size = 0
    for piece in _pieces(value, budget):
        out.append(piece)
        size += len(piece)
        if size > budget:
            break
    return "".join(out)


def _pieces(value: Any, budget: int):
    """The JSON text of ``value`` piece by piece, lazily (a huge list is never walked past
    the budget), without recursion."""
    levels: list[tuple[Any, str, bool]] = [(iter((value,)), "", False)]  # items, closer, dict?
    first = [True]
    while levels:
        items, closer, is_dict = levels[-1]
        try:
            item = next(items)
        except StopIteration:
            levels.pop()
            first.pop()
            yield closer
            continue
        if not first[-1]:
            yield ", "
        first[-1] = False
        if is_dict:
            key, item = item
            yield _key(key, budget) + ": "
        if isinstance(item, (dict, list, tuple)):
            if len(levels) > MAX_DEPTH:
                raise Unrenderable(f"the result is nested deeper than {MAX_DEPTH} levels")
            is_map = isinstance(item, dict)
            yield "{" if is_map else "["
            levels.append((iter(item.items()) if is_map else iter(item),
                           "}" if is_map else "]", is_map))
            first.append(True)
        else:
            yield _scalar(item, budget)


def _scalar(item: Any, budget: int) -> str:
    if item is None or isinstance(item, (bool, float)):
        return json.dumps(item)
    if isinstance(item, int):
        return _int(item, budget)
    if isinstance(item, str):
        return json.dumps(item[:budget + 1], ensure_ascii=False)
    return json.dumps(_str(item, budget), ensure_ascii=False)


def _int(value: int, budget: int) -> str:
    digits = int(value.bit_length() * _LOG10_2) + 1
    if digits > budget:
        raise Unrenderable(f"the result is an integer of about {digits:,} digits, more than "
                           f"the {budget:,} characters a result may hold")
    try:
        return str(value)
    except ValueError as exc:  # the interpreter's own int-to-text limit
        raise Unrenderable(f"the result is an integer of about {digits:,} digits, past "
                           f"Python's int-to-text limit ({exc})") from None


def _key(key: Any, budget: int) -> str:
    if isinstance(key, str):
        text = key
    elif key is None or isinstance(key, (bool, float)):
        text = json.dumps(key)
    elif isinstance(key, int):
        text = _int(key, budget)
    else:
        text = _str(key, budget)
    return json.dumps(text[:budget + 1], ensure_ascii=False)


def _str(value: Any, budget: int) -> str:
    try:
        text = str(value)
    except RecursionError:
        raise Unrenderable(f"the result ({type(value).__name__}) is nested too deep to "
                           "write as text") from None
    except Exception as exc:  # noqa: BLE001 - the object's own __str__ failed
        raise Unrenderable(f"the result ({type(value).__name__}) cannot become text: "
                           f"{type(exc).__name__}: {exc}") from None
    if not isinstance(text, str):
        raise Unrenderable(f"the result's __str__ returned {type(text).__name__}, not text")
    return text[:budget + 1] if len(text) > budget else text


def cap(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, head and tail kept."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n...[{len(text) - 2 * half} characters cut]...\n{text[-half:]}"
