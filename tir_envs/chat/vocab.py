"""Tokenizers per model family that build offline, for tests, demos and ``chat-check``.

* ``qwen3``: the bundled Qwen2 BPE, Qwen2.5's 22 added tokens, then Qwen3's four
  (``<tool_response>`` 151665, ``</tool_response>`` 151666, ``<think>`` 151667, ``</think>``
  151668): the real Qwen3 vocabulary, id for id.
* ``mistral``: Mistral's own Tekken file as shipped inside ``mistral-common`` (extra ``chat``),
  through ``transformers``' mistral-common backend: a real vocabulary.
* ``llama-3``, ``deepseek-v3``, ``deepseek-r1``, ``glm-4.5``: **stand-ins**.  Their vocabularies
  cannot be had offline, so the bundled BPE gets that family's special tokens appended.  The
  template structure (which special ids go where) is the family's; the ids of ordinary text are
  Qwen's, not the family's.  Every stand-in's ``name_or_path`` starts with ``stand-in/`` and
  ``is_stand_in`` says so.
Users pass their real tokenizer (``tokenizer=`` a folder or hub name) and get the same renderer.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tir_envs.tokenizer import qwen25_tokenizer

#: Qwen3's added tokens after Qwen2.5's (content, special)
QWEN3_EXTRA = (("<tool_response>", False), ("</tool_response>", False),
               ("<think>", False), ("</think>", False))

_US = "\u2581"


def _ds(name: str) -> str:
    return f"<\uff5c{name.replace(' ', _US)}\uff5c>"


#: (content, special) appended to the bundled BPE for each stand-in family
STAND_IN_TOKENS: dict[str, tuple[tuple[str, bool], ...]] = {
    "llama-3": tuple((t, True) for t in (
        "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
        "<|eot_id|>", "<|eom_id|>", "<|python_tag|>", "<|finetune_right_pad_id|>")),
    "deepseek-v3": tuple((_ds(n), True) for n in (
        "begin of sentence", "end of sentence", "User", "Assistant", "tool calls begin",
        "tool calls end", "tool call begin", "tool call end", "tool sep", "tool outputs begin",
        "tool outputs end", "tool output begin", "tool output end")),
    "glm-4.5": tuple((t, True) for t in (
        "[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>",
        "<think>", "</think>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
        "<tool_response>", "</tool_response>")),
}
STAND_IN_TOKENS["deepseek-r1"] = STAND_IN_TOKENS["deepseek-v3"] + (("<think>", False),
                                                                   ("</think>", False))
#: the EOS each stand-in declares (what its real tokenizer declares)
STAND_IN_EOS = {"llama-3": "<|eot_id|>", "deepseek-v3": _ds("end of sentence"),
                "deepseek-r1": _ds("end of sentence"), "glm-4.5": "<|endoftext|>"}
#: families ``family_tokenizer`` builds
OFFLINE_FAMILIES = ("chatml", "qwen3", "mistral", *STAND_IN_TOKENS)


def is_stand_in(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` is one of this module's stand-ins (not a family's real vocabulary)."""
    return str(getattr(tokenizer, "name_or_path", "")).startswith("stand-in/")


def family_tokenizer(family: str) -> Any:
    """The offline tokenizer of ``family`` (see the module docstring)."""
    if family == "chatml":
        return qwen25_tokenizer()
    if family == "qwen3":
        return qwen3_tokenizer()
    if family == "mistral":
        return mistral_tokenizer()
    if family in STAND_IN_TOKENS:
        return stand_in_tokenizer(family)
    raise ValueError(f"no offline tokenizer for family {family!r}; families: "
                     f"{', '.join(OFFLINE_FAMILIES)}")


def _extend(name: str, extra: tuple[tuple[str, bool], ...], eos: str):
    """The bundled Qwen2.5 tokenizer with ``extra`` tokens appended in order (fresh copy)."""
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast

    base = qwen25_tokenizer()
    backend = base.backend_tokenizer.__class__.from_str(base.backend_tokenizer.to_str())
    for content, special in extra:
        token = AddedToken(content, special=special, normalized=False)
        (backend.add_special_tokens if special else backend.add_tokens)([token])
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token=eos, pad_token="<|endoftext|>", unk_token=None,
        clean_up_tokenization_spaces=False, model_max_length=32768)
    tok.name_or_path = name
    return tok


@functools.lru_cache(maxsize=1)
def qwen3_tokenizer():
    """Qwen3's vocabulary (151,669 tokens), offline; no chat template (the renderer owns it)."""
    tok = _extend("tir-envs/qwen3", QWEN3_EXTRA, "<|im_end|>")
    assert tok.convert_tokens_to_ids("</think>") == 151668, "Qwen3 ids drifted"
    return tok


@functools.lru_cache(maxsize=4)
def stand_in_tokenizer(family: str):
    """The bundled BPE plus ``family``'s special tokens: a stand-in, labelled as one."""
    return _extend(f"stand-in/{family}", STAND_IN_TOKENS[family], STAND_IN_EOS[family])


#: the Tekken file shipped in mistral-common that ``mistral_tokenizer`` loads (Mistral NeMo's)
MISTRAL_TEKKEN = "tekken_240911.json"


def mistral_tekken_path() -> Path:
    try:
        import mistral_common
    except ImportError:
        raise ImportError("Mistral needs mistral-common: pip install 'tir-envs[chat]'") from None
    return Path(mistral_common.__file__).parent / "data" / MISTRAL_TEKKEN


@functools.lru_cache(maxsize=1)
def mistral_tokenizer():
    """Mistral's real Tekken tokenizer (mistral-common's shipped file), as a transformers
    tokenizer (``MistralCommonBackend``)."""
    from transformers.tokenization_mistral_common import MistralCommonBackend

    folder = Path(tempfile.mkdtemp(prefix="tir-mistral-"))
    shutil.copy(mistral_tekken_path(), folder / "tekken.json")
    tok = MistralCommonBackend.from_pretrained(str(folder))
    tok.name_or_path = "mistralai/tekken-240911"
    return tok
