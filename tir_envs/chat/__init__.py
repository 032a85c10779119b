"""Chat mode per model family: renderers, their registry, offline vocabularies, reasoning.

See ``docs/chat_models.md``.  ``ChatBinding`` is what an env uses; ``resolve_renderer`` picks a
family's renderer; ``tir_envs.chat.vocab`` builds the tokenizers tests use offline.
"""

from tir_envs.chat.binding import ChatBinding
from tir_envs.chat.reasoning import blank_reasoning
from tir_envs.chat.registry import FAMILIES, detect_family, resolve_renderer, supported
from tir_envs.chat.renderer import ChatRenderer, Reasoning, RendererRefused

__all__ = ["ChatBinding", "ChatRenderer", "FAMILIES", "Reasoning", "RendererRefused",
           "blank_reasoning", "detect_family", "resolve_renderer", "supported"]
