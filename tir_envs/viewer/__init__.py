"""``tir-envs view``: look at what the model did, token by token, in one self-contained page.

``write_page(source, out)`` turns a benchmark run folder, a ``samples.jsonl``, a trajectory
JSONL (``rollout.collect(..., out=...)``) or a folder of GRPO rollout dumps into an HTML page
that opens from disk with no network.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

#: names imported on first use (``tir-envs view --help`` reads only ``tir_envs.viewer.cli``)
_LAZY = {"page_data": "page", "render_page": "page", "TokenPieces": "pieces",
         "EpisodeRow": "sources", "ViewSourceError": "sources", "load_episodes": "sources"}
__all__ = ["EpisodeRow", "TokenPieces", "ViewSourceError", "load_episodes", "page_data",
           "pick_tokenizer", "render_page", "write_page"]


def pick_tokenizer(explicit: Any, settings: dict, episodes: list) -> tuple[Any, bool]:
    """``(tokenizer, guessed)``: the explicit one, the run's setting, or the one every ledger
    pins (``metadata["tokenizer"]``); else the bundled Qwen2.5, ``guessed``.  A
    ``module:function`` spec (a GRPO config's) is called."""
    from tir_envs.tokenizer import load_tokenizer

    pinned = {e.trajectory.metadata.get("tokenizer") for e in episodes}
    spec = explicit if explicit is not None else settings.get("tokenizer")
    if spec is None and len(pinned) == 1:
        spec = pinned.pop()
    if spec is None:
        return load_tokenizer(None), True
    if isinstance(spec, str) and re.fullmatch(r"[\w.]+:\w+", spec) and \
            not spec.startswith("family:"):
        from tir_envs.user_modules import resolve
        return resolve(spec, "tokenizer")(), False
    return load_tokenizer(spec), False


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"tir_envs.viewer.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'tir_envs.viewer' has no attribute {name!r}")


def write_page(source: str | Path, out: str | Path | None = None, tokenizer: Any = None,
               title: str | None = None) -> Path:
    """Write the page for ``source`` to ``out`` (default: ``view.html`` inside a run folder,
    else beside the file) and return its path.  ``tokenizer``: the one the ledger's ids belong
    to (default: the run's ``tokenizer`` setting, else the one the ledgers pin; with neither,
    the bundled Qwen2.5, and the page says it was guessed)."""
    from tir_envs.viewer.page import render_page
    from tir_envs.viewer.sources import load_episodes

    src = Path(source)
    episodes, settings = load_episodes(src)
    tok, guessed = pick_tokenizer(tokenizer, settings, episodes)
    target = Path(out) if out else (src / "view.html" if src.is_dir()
                                    else src.with_suffix(".html"))
    title = title or f"tir-envs view: {src.name}"
    if guessed:
        title += " (ids decoded with a GUESSED tokenizer: the bundled Qwen2.5; pass --tokenizer)"
    html = render_page(episodes, tok, settings, title)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(html, encoding="utf-8")
    return target
