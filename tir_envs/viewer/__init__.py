"""``tir-envs view``: look at what the model did, token by token, in one self-contained page.

``write_page(source, out)`` turns a benchmark run folder, a ``samples.jsonl``, a trajectory
JSONL (``rollout.collect(..., out=...)``) or a folder of GRPO rollout dumps into an HTML page
that opens from disk with no network.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tir_envs.viewer.page import page_data, render_page
from tir_envs.viewer.pieces import TokenPieces
from tir_envs.viewer.sources import Episode, ViewSourceError, load_episodes

__all__ = ["Episode", "TokenPieces", "ViewSourceError", "load_episodes", "page_data",
           "render_page", "write_page"]


def write_page(source: str | Path, out: str | Path | None = None, tokenizer: Any = None,
               title: str | None = None) -> Path:
    """Write the page for ``source`` to ``out`` (default: ``view.html`` inside a run folder,
    else beside the file) and return its path.  ``tokenizer``: the one the ledger's ids belong
    to (default: the run's ``tokenizer`` setting, else the bundled Qwen2.5)."""
    from tir_envs.tokenizer import load_tokenizer

    src = Path(source)
    episodes, settings = load_episodes(src)
    tok = load_tokenizer(tokenizer if tokenizer is not None else settings.get("tokenizer"))
    target = Path(out) if out else (src / "view.html" if src.is_dir()
                                    else src.with_suffix(".html"))
    html = render_page(episodes, tok, settings, title or f"tir-envs view: {src.name}")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(html, encoding="utf-8")
    return target
