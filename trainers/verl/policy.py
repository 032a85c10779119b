"""verl's LLM server manager as a tir_envs ``Policy``.

verl's agent loops generate through ``server_manager.generate(request_id, prompt_ids=...,
sampling_params=...)``, which returns a ``TokenOutput``: token ids, their logprobs (when
``sampling_params["logprobs"]``), and a ``stop_reason`` that is only ``completed`` or
``aborted`` (a stop string, EOS and the token cap all read ``completed``).  verl hands
``sampling_params`` to the engine as they are, so the env's stop strings go in with the
engine's own "keep the stop string" switch (vLLM ``include_stop_str_in_output``, SGLang
``no_stop_trim``).  The engine's ids are then cut by ``cut_at_stop``, which finds the same end a
stop-aware engine gives (through the token that completes the first stop string, or the first
EOS) and also says why the action ended, which ``TokenOutput`` does not.  Ids are never encoded
again.

Which weights sampled each action: verl's rollout server stamps every ``TokenOutput`` with
the ``global_steps`` of the weights it holds (``extra_fields["global_steps"]``, set at each
weight sync), and its client adds ``min_global_steps`` / ``max_global_steps``: with partial
rollout (``FullyAsyncLLMServerClient``, the async modes' client) an aborted generation is
resumed after the sync, so one action can span two versions.  The action's
``Generation.policy_version`` is its ``min_global_steps`` (the oldest weights among its
tokens); ``oldest`` / ``newest`` span the episode, for verl's own staleness fields.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Mapping, Sequence

from tir_envs.codec import Codec
from tir_envs.rollout.policy import Generation, PolicyError, SamplingParams
from tir_envs.rollout.stops import cut_at_stop

#: the sampling key that keeps the matched stop string in the output, per verl rollout backend
KEEP_STOP = {"vllm": "include_stop_str_in_output", "sglang": "no_stop_trim"}


class VerlServerPolicy:
    """Generates with verl's server manager for one episode (one sticky ``request_id``).

    ``sampling_params``: the dict verl hands the agent loop (temperature, top_p, top_k,
    logprobs, ...), sent as is; the env's stops and token cap are added per generation.
    ``backend``: ``actor_rollout_ref.rollout.name`` (``vllm``, ``sglang``, ...).
    """

    def __init__(self, server_manager: Any, codec: Codec, sampling_params: Mapping[str, Any],
                 backend: str, eos_token_ids: Sequence[int] = ()):
        self.server_manager = server_manager
        self.codec = codec
        self.sampling_params = dict(sampling_params)
        self.keep_stop = KEEP_STOP.get(backend)
        self.eos_token_ids = [int(i) for i in eos_token_ids]
        self.request_id = uuid.uuid4().hex
        self.generate_s = 0.0
        self.calls = 0
        self.oldest: int | None = None  # the episode's weights versions (verl's global_steps)
        self.newest: int | None = None

    async def generate(self, prompt_ids: Sequence[int], stop: Sequence[str],
                       sampling: SamplingParams) -> Generation:
        params = {**self.sampling_params, "max_tokens": int(sampling.max_tokens),
                  "stop": list(stop)}
        if self.keep_stop:
            params[self.keep_stop] = True
        t0 = time.perf_counter()
        out = await self.server_manager.generate(request_id=self.request_id,
                                                 prompt_ids=list(prompt_ids),
                                                 sampling_params=params)
        self.generate_s += time.perf_counter() - t0
        self.calls += 1
        if getattr(out, "stop_reason", None) == "aborted":
            raise PolicyError("verl's rollout server aborted the request (weights were being "
                              "updated or the server was paused)")
        ids = [int(i) for i in out.token_ids]
        logprobs = list(out.log_probs) if out.log_probs else None
        if logprobs is not None and len(logprobs) != len(ids):
            raise PolicyError(f"verl's server returned {len(logprobs)} logprobs for "
                              f"{len(ids)} tokens")
        cut = cut_at_stop(ids, self.codec.decode, stop, self.eos_token_ids, sampling.max_tokens)
        ids = ids[:cut.length]
        logprobs = None if logprobs is None else [float(x) for x in logprobs[:cut.length]]
        return Generation(ids, logprobs, cut.finish_reason, cut.stop_reason,
                          text=self.codec.decode(ids), policy_version=self._versions(out))

    def _versions(self, out: Any) -> int | None:
        """The output's oldest weights version (``None`` when the server gives none), noting
        its span in ``oldest`` / ``newest``."""
        fields = getattr(out, "extra_fields", None) or {}
        step = fields.get("global_steps")
        first, last = fields.get("min_global_steps", step), fields.get("max_global_steps", step)
        if first is None:
            return None
        first, last = int(first), int(first if last is None else last)
        self.oldest = first if self.oldest is None else min(self.oldest, first)
        self.newest = last if self.newest is None else max(self.newest, last)
        return first
