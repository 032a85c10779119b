"""``tir-envs view``: look at what the model did, token by token, in one self-contained page.

``write_page(source, out)`` turns a benchmark run folder, a ``samples.jsonl``, a trajectory
JSONL (``rollout.collect(..., out=...)``) or a folder of GRPO rollout dumps into an HTML page
that opens from disk with no network.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import importlib

#: names imported on first use (``tir-envs view --help`` reads only ``tir_envs.viewer.cli``)
_LAZY = {"page_data": "page", "render_page": "page", "TokenPieces": "pieces",
         "EpisodeRow": "sources", "ViewSourceError": "sources", "load_episodes": "sources"}
__all__ = ["EpisodeRow", "TokenPieces", "ViewSourceError", "load_episodes", "page_data",
           "render_page", "write_page"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"tir_envs.viewer.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'tir_envs.viewer' has no attribute {name!r}")


def write_page(source: str | Path, out: str | Path | None = None, tokenizer: Any = None,
               title: str | None = None) -> Path:
    """Write the page for ``source`` to ``out`` (default: ``view.html`` inside a run folder,
    else beside the file) and return its path.  ``tokenizer``: the one the ledger's ids belong
    to (default: the run's ``tokenizer`` setting, else the bundled Qwen2.5)."""
    from tir_envs.tokenizer import load_tokenizer
    from tir_envs.viewer.page import render_page
    from tir_envs.viewer.sources import load_episodes

    src = Path(source)
    episodes, settings = load_episodes(src)
    tok = load_tokenizer(tokenizer if tokenizer is not None else settings.get("tokenizer"))
    target = Path(out) if out else (src / "view.html" if src.is_dir()
                                    else src.with_suffix(".html"))
    html = render_page(episodes, tok, settings, title or f"tir-envs view: {src.name}")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(html, encoding="utf-8")
    return target
