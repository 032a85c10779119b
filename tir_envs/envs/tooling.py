"""The tools the shipped envs build, and the keywords that configure them, defined once.

Every env with a search tool (``tir/Search-v0``, ``tir/AutoTIR-v0``) takes the same search
keywords, every env with the Python sandbox (``tir/MathCode-v0``, ``tir/AutoTIR-v0``) the same
sandbox keywords, and each tool's timeout is ``tool_timeout_s`` (one number; for an env with
several tools, one number for all or a dict by tool name):

========================  =========  ===============================================
keyword                   default    meaning
========================  =========  ===============================================
``retriever``             ``None``   a ``Retriever``, an index folder, a retrieval-
                                     server URL or a factory; ``None``: the shipped
                                     HotpotQA paragraph index
``index``                 ``None``   an index folder or retrieval-server URL (the
                                     papers' wiki-18 index; Search-R1's ``index_path``
                                     / ``retriever_url``); give it or ``retriever``
``search_backend``        ``auto``   ``lucene``, ``bm25`` or ``auto`` (Lucene when Java
                                     21 is there)
``topk``                  3          documents per search
``backend``               ``local``  the sandbox: ``local``, ``e2b``, ``ray`` or a
                                     ``SandboxBackend``
``stateful``              ``True``   one interpreter per episode (``False``: each call
                                     runs alone, as the papers' one-shot executors)
``tool_timeout_s``        search 30 s, python 10 s, sql 5 s
========================  =========  ===============================================

Each shipped tool is one record in ``SHIPPED_TOOLS``: its config class names the tool, its
keywords, its default timeout and how it is built; envs (``pop_tool_config``), ``tools=["sql"]``
in ``tir/ToolUse-v0`` and ``tir-envs serve mcp`` (``shipped_tool``) all read it, so a new shipped
tool is one class here (docs/extending.md).  An env pops its tools' keywords from its
``**kwargs`` with ``pop_tool_config`` (unknown keywords then reach ``TIREnv`` and are refused
there, by name).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping

from tir_envs.tools.base import Tool
from tir_envs.tools.search.tool import RetrieverSource, SearchTool
from tir_envs.validation import check_positive_int, check_positive_number


@dataclass(frozen=True)
class SearchConfig:
    """The search tool's keywords (see the module table)."""

    name: ClassVar[str] = "search"
    keywords: ClassVar[tuple[str, ...]] = ("retriever", "index", "search_backend", "topk")
    #: what the model reads of it (``tir/ToolUse-v0``'s schema): description, (argument, doc)
    description: ClassVar[str] = "Search the corpus; returns the top documents."
    argument: ClassVar[tuple[str, str]] = ("query", "What to search for.")
    retriever: RetrieverSource | None = None
    index: str | Path | None = None
    search_backend: str = "auto"
    topk: int = 3
    timeout_s: float = 30.0

    def build(self) -> SearchTool:
        """The ``search`` tool, its source checked now so a wrong backend, folder or missing
        extra fails at construction, not at the first search."""
        from tir_envs.tools.search.backends import check_source
        retriever = self.source
        check_source(retriever, self.search_backend)
        if retriever is None:
            retriever = _default_retriever(self.search_backend)
        return SearchTool(retriever, topk=self.topk, timeout_s=self.timeout_s)

    @property
    def source(self) -> RetrieverSource | None:
        """What to search: ``index`` or ``retriever`` (one of them), ``None`` for the default."""
        if self.index is None:
            return self.retriever
        if self.retriever is not None:
            raise ValueError("give the search index once: index= (an index folder or server "
                             "URL) or retriever= (that, or a Retriever object), not both")
        if not isinstance(self.index, (str, Path)):
            raise TypeError(f"index must be an index folder or a retrieval-server URL, got "
                            f"{type(self.index).__name__}; pass a Retriever object as "
                            "retriever=")
        return str(self.index)


@dataclass(frozen=True)
class PythonConfig:
    """The Python sandbox's keywords (see the module table)."""

    name: ClassVar[str] = "python"
    keywords: ClassVar[tuple[str, ...]] = ("backend", "stateful")
    description: ClassVar[str] = ("Run Python code and return what it prints, or the error. "
                                  "Print the values you need to see.")
    argument: ClassVar[tuple[str, str]] = ("code", "Python source to run.")
    backend: Any = "local"
    stateful: bool = True
    timeout_s: float = 10.0

    def build(self, error_style: str = "full") -> Tool:
        """The ``python`` tool; ``error_style``: how the protocol's paper shows a failed run."""
        from tir_envs.tools.python import PythonTool
        return PythonTool(backend=self.backend, timeout_s=self.timeout_s,
                          stateful=self.stateful, error_style=error_style)


def warm_sandbox(env_class: Any, env_kwargs: Mapping[str, Any]) -> bool:
    """Start the local sandbox pool an env of ``env_class`` built with ``env_kwargs`` will use,
    in the background, now (``SandboxPool.warm``); whether one was started.  The command line
    calls it before loading the policy and tokenizer, so the first tool result comes from a
    pool already warm.  Other backends (E2B, Ray) and envs without the sandbox: nothing."""
    if "python" not in getattr(env_class, "configured_tools", ()):
        return False
    from tir_envs.tools.python.backends.registry import make_backend
    from tir_envs.tools.python.backends.local import LocalBackend

    backend = env_kwargs.get("backend", "local")
    if not (backend == "local" or (isinstance(backend, Mapping)
                                   and backend.get("name") == "local")):
        return False
    built = make_backend(backend)
    if not isinstance(built, LocalBackend):
        return False
    built.pool.warm()
    return True


@dataclass(frozen=True)
class SQLConfig:
    """The SQL tool as ``tir/ToolUse-v0`` and ``serve mcp`` build it: only its timeout (the
    database comes with each task; ``tir/SQL-v0`` configures its own engine and limits)."""

    name: ClassVar[str] = "sql"
    keywords: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = ("Run one SQL query against the task's database (read-only) "
                                  "and return the rows.")
    argument: ClassVar[tuple[str, str]] = ("query", "The SQL query.")
    timeout_s: float = 5.0

    def build(self) -> Tool:
        from tir_envs.tools.sql.tool import SQLTool
        return SQLTool(timeout_s=self.timeout_s)


#: every shipped tool, one record each: its name -> its config class (keywords, timeout, build)
SHIPPED_TOOLS: dict[str, type] = {c.name: c for c in (PythonConfig, SearchConfig, SQLConfig)}
#: each tool's default timeout (seconds per call)
DEFAULT_TIMEOUTS = {name: config.timeout_s for name, config in SHIPPED_TOOLS.items()}


def shipped_tool(name: str, timeout_s: float | None = None, **options: Any) -> Tool:
    """The shipped tool ``name``, configured by those of ``options`` that are its keywords (a
    caller serving several tools passes every tool's options; ``None`` keeps a default)."""
    if name not in SHIPPED_TOOLS:
        raise ValueError(f"unknown shipped tool {name!r}; choose from "
                         f"{', '.join(SHIPPED_TOOLS)}")
    config = SHIPPED_TOOLS[name]
    given = {k: v for k, v in options.items() if k in config.keywords and v is not None}
    return config(**given, timeout_s=timeout_s or config.timeout_s).build()


def tool_keywords(tools: tuple[str, ...] | list[str]) -> set[str]:
    """The keywords that configure ``tools`` (what ``pop_tool_config`` takes)."""
    names = {key for name in tools for key in SHIPPED_TOOLS[name].keywords}
    return names | {"tool_timeout_s"} if tools else names


def pop_tool_config(kwargs: dict[str, Any], *tools: str) -> dict[str, Any]:
    """The configuration of each of ``tools`` (names in ``SHIPPED_TOOLS``), popped from an env's
    keyword arguments, with their timeouts from ``tool_timeout_s``; checked now."""
    timeouts = tool_timeouts(kwargs.pop("tool_timeout_s", None), tools)
    out = {}
    for name in tools:
        config = SHIPPED_TOOLS[name]
        given = {key: kwargs.pop(key) for key in config.keywords if key in kwargs}
        out[name] = config(**given, timeout_s=timeouts[name])
    if "search" in out:
        check_positive_int(topk=out["search"].topk, hint="documents per search")
    if "python" in out and not isinstance(out["python"].stateful, bool):
        raise TypeError(f"stateful must be True or False, got {out['python'].stateful!r}")
    return out


def tool_timeouts(value: float | Mapping[str, float] | None, tools: tuple[str, ...] | list[str]
                  ) -> dict[str, float]:
    """Seconds per call of each of ``tools``: ``None`` (the defaults), one number for all, or
    a dict by tool name (the others keep their defaults)."""
    defaults = {name: DEFAULT_TIMEOUTS[name] for name in tools}
    if value is None:
        return defaults
    if isinstance(value, Mapping):
        unknown = set(value) - set(defaults)
        if unknown:
            raise ValueError(f"tool_timeout_s names unknown tools {sorted(unknown)}; the tools "
                             f"are {sorted(defaults)}")
        check_positive_number(unit="seconds", **{f"tool_timeout_s[{k!r}]": v
                                                 for k, v in value.items()})
        return {**defaults, **{k: float(v) for k, v in value.items()}}
    check_positive_number(unit="seconds", tool_timeout_s=value)
    return {name: float(value) for name in defaults}


def _default_retriever(backend: str):
    def open_default():
        from tir_envs.tools.search.hotpotqa import hotpotqa_retriever
        return hotpotqa_retriever(backend)
    return open_default
