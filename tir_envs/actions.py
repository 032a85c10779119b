"""What ``step`` accepts as an action, normalised to token ids before anything is recorded.

An action is the ids the policy generated for one turn: a list or 1-D array of ints, a dict
``{"tokens": ids, "logprobs": [...]}``, or a string (re-encoded; its drift is counted on the
ledger).  Bad input is refused here, with what was wrong and the fix, before the episode
changes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

Action = tuple[list[int], "list[float] | None", "str | None"]


def coerce_action(action: Any, codec: Any) -> Action:
    """``(ids, logprobs, text)`` of an action; ``text`` only for a string action."""
    logprobs = None
    if isinstance(action, dict):
        if "tokens" not in action:
            raise ValueError("a dict action needs 'tokens' (and optionally 'logprobs'); "
                             f"got keys {sorted(action)}")
        logprobs = action.get("logprobs")
        action = action["tokens"]
    if isinstance(action, str):
        return codec.encode(action), None, action
    vocab = codec.vocab_size
    if type(action) is list and all(type(i) is int for i in action):
        ids = action  # the common case (a generator's ids): checked without numpy
        if ids and (min(ids) < 0 or max(ids) >= vocab):
            _reject_ids(min(ids), max(ids), vocab)
        return list(ids), _floats(logprobs), None
    try:
        arr = np.asarray(action)
    except Exception as exc:  # noqa: BLE001 - any unconvertible object
        raise TypeError(f"action must be token ids, got {type(action).__name__}") from exc
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise TypeError("action must be a 1-D sequence of integer token ids (or a str, "
                        f"which is retokenized); got dtype={arr.dtype} shape={arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() >= vocab):
        _reject_ids(arr.min(), arr.max(), vocab)
    return arr.tolist(), _floats(logprobs), None


def _reject_ids(low: int, high: int, vocab: int) -> None:
    raise ValueError(f"action ids must lie in [0, {vocab}); got min={low} max={high}. Is "
                     "this the env's tokenizer?")


def _floats(logprobs: Any) -> list[float] | None:
    return None if logprobs is None else [float(x) for x in logprobs]
