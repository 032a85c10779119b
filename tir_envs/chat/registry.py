"""Which renderer a tokenizer gets: by family name (``renderer=``), else detected.

Families with a renderer: ``qwen3`` (thinking on/off; our own, ``tir_envs.chat.qwen3``);
``llama-3``, ``deepseek-v3``, ``deepseek-r1`` (always reasoning: pass ``renderer=
"deepseek-r1"``, its vocabulary is V3's), ``glm-4.5`` (thinking on/off) through PyPI ``renderers``; ``mistral`` through
``mistral-common``; ``template``: the tokenizer's own chat template with sentinel glue, only if
``probe_template`` proves it prefix-stable (the bundled ChatML is).  ``gpt-oss`` is not offered:
its Harmony encoder downloads its vocabulary at first use, which a closed machine cannot do.
"""

from __future__ import annotations

import re
from typing import Any

from tir_envs.chat.adapter import RENDERERS_FAMILIES, RenderersAdapter
from tir_envs.chat.renderer import ChatRenderer
from tir_envs.chat.template import TemplateRenderer, probe_template

#: family -> thinking modes it has (empty: no switch)
FAMILIES: dict[str, tuple[str, ...]] = {
    "qwen3": ("on", "off"), "llama-3": (), "deepseek-v3": (), "deepseek-r1": (),
    "glm-4.5": ("on", "off"),
    "mistral": (), "template": (),
}
THINKING = ("on", "off")


def supported() -> str:
    return ", ".join(f"{f} (thinking {'/'.join(m)})" if m else f for f, m in FAMILIES.items())


def detect_family(tokenizer: Any) -> str | None:
    """The family a tokenizer belongs to, from its vocabulary (``None``: unknown)."""
    if type(tokenizer).__name__ in ("MistralCommonBackend", "MistralCommonTokenizer"):
        return "mistral"
    # the markers are added tokens: the added vocabulary is small (get_vocab builds 150k keys)
    vocab = tokenizer.get_added_vocab() if hasattr(tokenizer, "get_added_vocab") else {}
    if "[INST]" in vocab and "[TOOL_CALLS]" in vocab:  # a Mistral loaded from tokenizer.json
        return "mistral"
    if "<|observation|>" in vocab and "[gMASK]" in vocab:
        return "glm-4.5"
    if "<|start_header_id|>" in vocab and "<|eot_id|>" in vocab:
        return "llama-3"
    if "<\uff5cAssistant\uff5c>" in vocab:
        return "deepseek-v3"
    if "<|im_start|>" in vocab and "</think>" in vocab and "<tool_response>" in vocab:
        # Qwen3.5 and later share the vocabulary but not the template (XML calls): no guess
        name = str(getattr(tokenizer, "name_or_path", "")).lower()
        return None if re.search(r"qwen3[._-]?[5-9]", name) else "qwen3"
    return None


def resolve_renderer(tokenizer: Any, codec: Any, renderer: Any = None,
                     thinking: str | None = None, role: str | None = None) -> ChatRenderer:
    """The renderer for ``tokenizer`` (see the module docstring); raises, naming ``renderer=``
    and the supported families, when none applies."""
    if isinstance(renderer, ChatRenderer):
        return renderer
    if thinking is not None and thinking not in THINKING:
        raise ValueError(f"thinking must be 'on' or 'off', got {thinking!r}")
    family = renderer or detect_family(tokenizer) or "template"
    if family not in FAMILIES:
        raise ValueError(f"unknown renderer {family!r}; supported: {supported()}")
    if thinking is not None and not FAMILIES[family]:
        raise ValueError(f"the {family} renderer has no thinking switch (thinking={thinking!r}); "
                         f"families with one: qwen3, glm-4.5")
    if family == "qwen3":
        from tir_envs.chat.qwen3 import Qwen3Renderer
        return Qwen3Renderer(tokenizer, codec, thinking)
    if family in RENDERERS_FAMILIES:
        return RenderersAdapter(tokenizer, family, thinking)
    if family == "mistral":
        from tir_envs.chat.mistral import MistralRenderer
        return MistralRenderer(tokenizer, thinking)
    glue = probe_template(tokenizer, role) if role else None
    if isinstance(glue, str):
        raise ValueError(
            f"the tokenizer's chat template cannot be bridged exactly: {glue}. Pass "
            f"renderer=FAMILY for a model family with a renderer ({supported()}), or chat=False "
            "for raw text")
    return TemplateRenderer(tokenizer, codec, glue)
