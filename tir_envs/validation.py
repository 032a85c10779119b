"""Argument checks shared by every public entry point (one way to say "must be positive")."""

from __future__ import annotations

from typing import Any


def check_positive_int(*, allow_none: bool = False, hint: str = "", **values: Any) -> None:
    """Raise ``ValueError`` naming the first of ``values`` that is not a positive int (``bool``
    is not an int here).  ``allow_none``: ``None`` means "the default"; ``hint`` ends the
    message (how to fix it)."""
    for name, value in values.items():
        if value is None and allow_none:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            none = " (or None for the default)" if allow_none else ""
            raise ValueError(f"{name} must be a positive int{none}, got {value!r}"
                             + (f"; {hint}" if hint else ""))


def check_positive_number(*, allow_none: bool = False, unit: str = "", **values: Any) -> None:
    """Raise ``ValueError`` naming the first of ``values`` that is not a number > 0 (``unit``,
    e.g. ``"seconds"``, is named in the message)."""
    for name, value in values.items():
        if value is None and allow_none:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            unit_text = f" {unit}" if unit else ""
            none = " or None" if allow_none else ""
            raise ValueError(f"{name} must be > 0{unit_text}{none}, got {value!r}")


def private_api_moved(package: str, name: str, purpose: str) -> str:
    """The message for a private API of a pinned dependency that is no longer there."""
    from importlib.metadata import version
    try:
        installed = version("openenv-core" if package == "openenv" else package)
    except Exception:  # noqa: BLE001 - the message must still come out
        installed = "unknown"
    return (f"{package} {installed} no longer has {name}, which tir-envs uses for {purpose}; "
            f"install the version tir-envs pins (pyproject.toml's extras) or update tir-envs")
