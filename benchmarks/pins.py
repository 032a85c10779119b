"""Content pins: what a policy spec or a tasks file points to, as a hash kept in ``run.json``.

A run resumed over several invocations must hold one policy's answers.  The spec string alone
does not say that: a scripted policy's file can be edited and a model folder's weights swapped
between two invocations.  The pin is computed before anything loads and compared with the one
the run folder holds; a mismatch is refused.

* ``scripted:FILE``: the file's sha256.
* ``hf:PATH`` / ``vllm:PATH``: the sha256 of the model folder's config and tokenizer files, and
  the names and sizes of its weight files (hashing many GB of weights on every resume would
  cost minutes; a weight swap changes names or sizes in practice; a same-size in-place rewrite
  is not caught).
* ``openai:URL``: nothing can be pinned from here (the server's weights are not visible); the
  URL and model name are in the settings.  ``oracle``/``wrong``: code, nothing to pin.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tir_envs.bench.suites import file_sha256

#: small files of a model folder that decide what it generates, hashed whole
_MODEL_FILES = ("config.json", "generation_config.json", "tokenizer.json",
                "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
                "tokenizer.model", "chat_template.jinja", "added_tokens.json")
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".index.json")


def model_folder_pin(folder: str | Path) -> dict[str, Any]:
    """Hashes of the config/tokenizer files and ``{weight file: size}`` of a model folder."""
    folder = Path(folder)
    files = {name: file_sha256(folder / name) for name in _MODEL_FILES
             if (folder / name).is_file()}
    weights = {p.name: p.stat().st_size for p in sorted(folder.iterdir())
               if p.is_file() and p.name.endswith(_WEIGHT_SUFFIXES)}
    return {"files_sha256": files, "weights": weights}


def policy_pin(spec: Any) -> dict[str, Any] | None:
    """The pin of a policy spec string (module docstring); ``None`` when nothing can be pinned."""
    if not isinstance(spec, str):
        return None
    kind, _, target = spec.partition(":")
    if kind == "scripted" and Path(target).is_file():
        return {"kind": kind, "sha256": file_sha256(Path(target))}
    if kind in ("hf", "vllm") and Path(target).is_dir():
        return {"kind": kind, **model_folder_pin(target)}
    return None


def pin_diff(old: Any, new: Any) -> str:
    """What changed between two pins, in words (for the refusal message)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return f"{json.dumps(old)} then, {json.dumps(new)} now"
    if "sha256" in old or "sha256" in new:
        return f"sha256 {old.get('sha256')} then, {new.get('sha256')} now"
    parts = []
    for key in ("files_sha256", "weights"):
        a, b = old.get(key, {}), new.get(key, {})
        for name in sorted(set(a) | set(b)):
            if a.get(name) != b.get(name):
                parts.append(f"{name}: {a.get(name, 'absent')} then, {b.get(name, 'absent')} now")
    return "; ".join(parts) or "the pins differ"


def uses_search(env_id: str) -> bool:
    """Whether the env ``env_id`` has the search tool (so an index decides its results)."""
    from tir_envs.registry import env_class
    return "search" in getattr(env_class(env_id), "configured_tools", ())


def search_index_pin(env_ids: list[str], env_kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """Which search index a run's search suites use, for ``run.json`` and the report: the
    ``index`` (or ``retriever``) env argument described by its manifest (backend, passages,
    corpus, encoder) or its server's ``/health``; ``None`` when no suite searches or none was
    given (the shipped HotpotQA paragraph index).  A missing index fails here, before the run."""
    from tir_envs.envs.tooling import SearchConfig
    if not any(uses_search(e) for e in env_ids):
        return None
    source = SearchConfig(retriever=env_kwargs.get("retriever"),
                          index=env_kwargs.get("index")).source  # both given: refused now
    if source is None:
        return None
    from tir_envs.tools.search.backends import describe_index
    from tir_envs.tools.search.retriever import Retriever
    if isinstance(source, Retriever):
        return {"object": type(source).__name__, **source.describe()}
    if not isinstance(source, (str, Path)):
        return {"object": type(source).__name__}
    return describe_index(source)
