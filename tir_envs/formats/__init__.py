"""Tool-call formats by name: ``markdown``, ``tags``, ``json``."""

from __future__ import annotations

from tir_envs.formats.base import ToolCall, ToolCallFormat
from tir_envs.formats.json_calls import JsonFormat
from tir_envs.formats.markdown import MarkdownFormat
from tir_envs.formats.tags import TagsFormat, TagSpec

FORMATS = {"markdown": MarkdownFormat, "tags": TagsFormat, "json": JsonFormat}


def get_format(fmt: str | ToolCallFormat, **kwargs) -> ToolCallFormat:
    """A format instance from its name (or pass one through)."""
    if isinstance(fmt, ToolCallFormat):
        return fmt
    if fmt not in FORMATS:
        raise ValueError(f"unknown tool-call format {fmt!r}; choose one of {sorted(FORMATS)}")
    return FORMATS[fmt](**kwargs)


__all__ = ["ToolCall", "ToolCallFormat", "MarkdownFormat", "TagsFormat", "TagSpec",
           "JsonFormat", "FORMATS", "get_format"]
