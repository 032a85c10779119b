"""Model families: each one record (``Family``), and picking one for a tokenizer.

A record holds everything about a family in one place: its renderer (which owns the prompt,
the bridge, the stop ids, the call parser and the reasoning rule: ``ChatRenderer``), its thinking
modes, how a tokenizer is recognised as one of its own, and the vLLM parsers its rules follow.
Adding a family is writing its renderer and one ``Family(...)`` line in ``RECORDS``
(docs/chat_models.md, "Adding a family").

``template`` is the tokenizer's own chat template with sentinel glue, used only if
``probe_template`` proves it prefix-stable (the bundled ChatML is).  DeepSeek R1 shares V3's
vocabulary: pass ``renderer="deepseek-r1"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from tir_envs.chat.renderer import ChatRenderer

THINKING = ("on", "off")


@dataclass(frozen=True)
class Family:
    """One model family (see the module docstring)."""

    name: str
    #: ``(tokenizer, codec, thinking) -> ChatRenderer``
    make: Callable[[Any, Any, str | None], ChatRenderer]
    #: thinking modes (empty: no switch)
    thinking: tuple[str, ...] = ()
    #: ``(added_vocab, tokenizer) -> bool``: the tokenizer is this family's (``None``: never
    #: detected, name it with ``renderer=``)
    detect: Callable[[dict, Any], bool] | None = None
    #: vLLM's ``--reasoning-parser`` and ``--tool-call-parser`` for the family (the rules the
    #: renderer's reasoning and calls follow; docs/chat_models.md)
    vllm: tuple[str | None, str | None] = (None, None)


def _renderers(family: str) -> Callable[[Any, Any, str | None], ChatRenderer]:
    def make(tokenizer: Any, codec: Any, thinking: str | None) -> ChatRenderer:
        from tir_envs.chat.adapter import RenderersAdapter
        return RenderersAdapter(tokenizer, family, thinking)
    return make


def _qwen3(tokenizer: Any, codec: Any, thinking: str | None) -> ChatRenderer:
    from tir_envs.chat.qwen3 import Qwen3Renderer
    return Qwen3Renderer(tokenizer, codec, thinking)


def _mistral(tokenizer: Any, codec: Any, thinking: str | None) -> ChatRenderer:
    from tir_envs.chat.mistral import MistralRenderer
    return MistralRenderer(tokenizer, thinking)


def _gpt_oss(tokenizer: Any, codec: Any, thinking: str | None) -> ChatRenderer:
    from tir_envs.chat.harmony import HarmonyRenderer
    return HarmonyRenderer(tokenizer, thinking)


def _is_qwen3(vocab: dict, tokenizer: Any) -> bool:
    # Qwen3.5 and later share the vocabulary but not the template (XML calls): no guess
    name = str(getattr(tokenizer, "name_or_path", "")).lower()
    return "<|im_start|>" in vocab and "</think>" in vocab and "<tool_response>" in vocab \
        and not re.search(r"qwen3[._-]?[5-9]", name)


#: every family, in detection order (the first whose ``detect`` holds is the tokenizer's)
RECORDS: tuple[Family, ...] = (
    Family("mistral", _mistral, detect=lambda v, t: type(t).__name__ in (
        "MistralCommonBackend", "MistralCommonTokenizer") or ("[INST]" in v and
                                                              "[TOOL_CALLS]" in v),
        vllm=(None, "mistral")),
    Family("glm-4.5", _renderers("glm-4.5"), THINKING,
           lambda v, t: "<|observation|>" in v and "[gMASK]" in v, ("glm45", "glm45")),
    Family("gpt-oss", _gpt_oss, (), lambda v, t: "<|channel|>" in v and "<|call|>" in v,
           ("openai_gptoss", "openai")),
    Family("llama-3", _renderers("llama-3"), (),
           lambda v, t: "<|start_header_id|>" in v and "<|eot_id|>" in v,
           (None, "llama3_json")),
    Family("deepseek-v3", _renderers("deepseek-v3"), (),
           lambda v, t: "<\uff5cAssistant\uff5c>" in v, (None, "deepseek_v3")),
    Family("deepseek-r1", _renderers("deepseek-r1"), (), None, ("deepseek_r1", "deepseek_v3")),
    Family("qwen3", _qwen3, THINKING, _is_qwen3, ("qwen3", "hermes")),
    Family("template", lambda tok, codec, th: None),  # built in resolve_renderer (probed)
)
BY_NAME: dict[str, Family] = {f.name: f for f in RECORDS}
#: family -> thinking modes it has (empty: no switch)
FAMILIES: dict[str, tuple[str, ...]] = {f.name: f.thinking for f in RECORDS}


def supported() -> str:
    return ", ".join(f"{f} (thinking {'/'.join(m)})" if m else f for f, m in FAMILIES.items())


def detect_family(tokenizer: Any) -> str | None:
    """The family a tokenizer belongs to, from its vocabulary (``None``: unknown)."""
    # the markers are added tokens: the added vocabulary is small (get_vocab builds 150k keys)
    vocab = tokenizer.get_added_vocab() if hasattr(tokenizer, "get_added_vocab") else {}
    return next((f.name for f in RECORDS if f.detect and f.detect(vocab, tokenizer)), None)


def resolve_renderer(tokenizer: Any, codec: Any, renderer: Any = None,
                     thinking: str | None = None, role: str | None = None) -> ChatRenderer:
    """The renderer for ``tokenizer`` (see the module docstring); raises, naming ``renderer=``
    and the supported families, when none applies."""
    if isinstance(renderer, ChatRenderer):
        return renderer
    if thinking is not None and thinking not in THINKING:
        raise ValueError(f"thinking must be 'on' or 'off', got {thinking!r}")
    family = renderer or detect_family(tokenizer) or "template"
    if family not in BY_NAME:
        raise ValueError(f"unknown renderer {family!r}; supported: {supported()}")
    if thinking is not None and not FAMILIES[family]:
        raise ValueError(f"the {family} renderer has no thinking switch (thinking={thinking!r}); "
                         "families with one: "
                         f"{', '.join(f for f, m in FAMILIES.items() if m)}")
    if family != "template":
        return BY_NAME[family].make(tokenizer, codec, thinking)
    from tir_envs.chat.template import TemplateRenderer, probe_template
    glue = probe_template(tokenizer, role) if role else None
    if isinstance(glue, str):
        raise ValueError(
            f"the tokenizer's chat template cannot be bridged exactly: {glue}. Pass "
            f"renderer=FAMILY for a model family with a renderer ({supported()}), or chat=False "
            "for raw text")
    return TemplateRenderer(tokenizer, codec, glue)
