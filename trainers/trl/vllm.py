"""TRL's own vLLM (``GRPOConfig(use_vllm=True)``) as a tir_envs ``Policy``.

TRL keeps its vLLM in ``trainer.vllm_generation``: in ``server`` mode a ``VLLMClient`` talking
to ``trl vllm-serve`` (weights pushed by TRL after each step), in ``colocate`` mode an in-process
``vllm.LLM``.  Both take token ids and give token ids and per-token logprobs back; this policy
sends the env's stop strings with ``include_stop_str_in_output`` and its token cap, then cuts
the ids with ``cut_at_stop`` (which also says why the action ended).  Ids are never encoded
again.  Both calls block, so each runs on a worker thread, one at a time (TRL's engine is not
safe to call from two threads), while the other episodes' tools keep running.

Not run here: no GPU was available to this project's tests; the server path is exercised
against a stand-in for ``VLLMClient.generate``'s documented return value.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Sequence

from tir_envs.codec import Codec
from tir_envs.rollout.policy import Generation, PolicyError, SamplingParams
from tir_envs.rollout.stops import cut_at_stop


class TRLVLLMPolicy:
    """Generates with ``trainer.vllm_generation`` (server or colocate mode)."""

    def __init__(self, trainer: Any, tokenizer: Any):
        generation = getattr(trainer, "vllm_generation", None)
        if generation is None:
            raise ValueError("generate='vllm' needs GRPOConfig(use_vllm=True, vllm_mode='server' "
                             "or 'colocate'); on CPU use generate='transformers'")
        self.generation = generation
        self.mode = generation.mode
        self.codec = Codec(tokenizer)
        self.tokenizer = tokenizer
        self.eos_token_ids = [tokenizer.eos_token_id]
        self._lock = threading.Lock()

    async def generate(self, prompt_ids: Sequence[int], stop: Sequence[str],
                       sampling: SamplingParams) -> Generation:
        ids, logprobs = await asyncio.to_thread(self._generate, list(prompt_ids), list(stop),
                                                sampling)
        if len(logprobs) != len(ids):
            raise PolicyError(f"TRL's vLLM returned {len(logprobs)} logprobs for {len(ids)} "
                              "tokens")
        cut = cut_at_stop(ids, self.codec.decode, stop, self.eos_token_ids, sampling.max_tokens)
        return Generation(ids[:cut.length], logprobs[:cut.length], cut.finish_reason,
                          cut.stop_reason, text=self.codec.decode(ids[:cut.length]))

    def _generate(self, prompt: list[int], stop: list[str],
                  sampling: SamplingParams) -> tuple[list[int], list[float]]:
        kwargs = {"stop": stop, "include_stop_str_in_output": True}
        with self._lock:
            if self.mode == "server":
                out = self.generation.vllm_client.generate(
                    prompts=[prompt], n=1, temperature=sampling.temperature,
                    top_p=sampling.top_p, top_k=sampling.top_k, max_tokens=sampling.max_tokens,
                    logprobs=0, generation_kwargs=kwargs)
                return ([int(i) for i in out["completion_ids"][0]],
                        [float(step[0]) for step in out["logprobs"][0]])
            from vllm import SamplingParams as VSampling

            params = VSampling(n=1, temperature=sampling.temperature, top_p=sampling.top_p,
                               top_k=sampling.top_k, max_tokens=sampling.max_tokens, logprobs=0,
                               **kwargs)
            (result,) = self.generation.llm.generate([{"prompt_token_ids": prompt}],
                                                     sampling_params=params, use_tqdm=False)
            output = result.outputs[0]
            ids = [int(i) for i in output.token_ids]
            return ids, [float(step[t].logprob) for step, t in zip(output.logprobs, ids)]
