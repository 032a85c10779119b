"""Chat mode per model family: renderers, their registry, offline vocabularies, reasoning.

See ``docs/chat_models.md``.  ``ChatBinding`` is what an env uses; ``resolve_renderer`` picks a
family's renderer (each family is one ``Family`` record in ``RECORDS``); ``split_reasoning`` and
``read_completion`` read a completion by the family's one reasoning rule (what a gateway
returns); ``tir_envs.chat.vocab`` builds the tokenizers tests use offline.
"""

from tir_envs.chat.binding import ChatBinding
from tir_envs.chat.reasoning import (Completion, HarmonyReasoning, ReasoningSplit,
                                     blank_reasoning, read_completion, split_reasoning)
from tir_envs.chat.registry import (FAMILIES, RECORDS, Family, detect_family, resolve_renderer,
                                    supported)
from tir_envs.chat.renderer import ChatRenderer, Reasoning, RendererRefused

__all__ = ["ChatBinding", "ChatRenderer", "Completion", "FAMILIES", "Family", "HarmonyReasoning",
           "RECORDS", "Reasoning", "ReasoningSplit", "RendererRefused", "blank_reasoning",
           "detect_family", "read_completion", "resolve_renderer", "split_reasoning",
           "supported"]
