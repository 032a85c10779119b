"""TRL's own vLLM (``GRPOConfig(use_vllm=True)``) as a tir_envs ``Policy``.

TRL keeps its vLLM in ``trainer.vllm_generation``: in ``server`` mode a ``VLLMClient`` talking
to ``trl vllm-serve`` (weights pushed by TRL after each step), in ``colocate`` mode an in-process
``vllm.LLM``.  Both take token ids and give token ids and per-token logprobs back; this policy
sends the env's stop strings with ``include_stop_str_in_output`` and its token cap, then cuts
the ids with ``cut_at_stop`` (which also says why the action ended).  Ids are never encoded
again.  Both calls block, so each runs on a worker thread, one at a time (TRL's engine is not
safe to call from two threads), while the other episodes' tools keep running.

Several training processes in ``server`` mode: TRL makes ``vllm_client`` on the main process
only, so the other ranks never call it; their requests go to the main process in rounds and the
answers come back (``tir_envs.trainers.trl.server_rounds``, as TRL's own rollout gathers prompts and
broadcasts completions).

Not run here: no GPU was available to this project's tests; the server path is exercised
against a stand-in for ``VLLMClient.generate``'s documented return value, with two ranks
(gloo) for the rounds.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Sequence

from tir_envs.codec import Codec
from tir_envs.rollout.policy import Generation, PolicyError, SamplingParams
from tir_envs.rollout.stops import cut_at_stop
from tir_envs.trainers.trl.server_rounds import ServerRounds


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
        accelerator = getattr(trainer, "accelerator", None)
        #: several ranks in server mode: generation goes through the main process in rounds
        self.rounds = (ServerRounds(accelerator, self._generate_many)
                       if self.mode == "server" and getattr(accelerator, "num_processes", 1) > 1
                       else None)

    async def generate(self, prompt_ids: Sequence[int], stop: Sequence[str],
                       sampling: SamplingParams) -> Generation:
        request = _request(list(prompt_ids), list(stop), sampling)
        if self.rounds is not None:
            ids, logprobs = await self._through_rounds(request)
        else:
            ids, logprobs = await asyncio.to_thread(self._generate, request)
        if len(logprobs) != len(ids):
            raise PolicyError(f"TRL's vLLM returned {len(logprobs)} logprobs for {len(ids)} "
                              "tokens")
        cut = cut_at_stop(ids, self.codec.decode, stop, self.eos_token_ids, sampling.max_tokens)
        return Generation(ids[:cut.length], logprobs[:cut.length], cut.finish_reason,
                          cut.stop_reason, text=self.codec.decode(ids[:cut.length]))

    async def _through_rounds(self, request: dict[str, Any]) -> tuple[list[int], list[float]]:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future = loop.create_future()

        def resolve(value: Any, error: BaseException | None) -> None:
            def settle() -> None:
                if not answer.done():
                    answer.set_exception(error) if error else answer.set_result(value)
            loop.call_soon_threadsafe(settle)

        self.rounds.ask(request, resolve)
        try:
            return await answer
        except RuntimeError as exc:
            raise PolicyError(str(exc)) from exc

    def _generate(self, request: dict[str, Any]) -> tuple[list[int], list[float]]:
        with self._lock:
            if self.mode == "server":
                return self._generate_many([request])[0]
            from vllm import SamplingParams as VSampling

            params = VSampling(n=1, logprobs=0, include_stop_str_in_output=True,
                               **{k: v for k, v in request.items() if k != "prompt"})
            (result,) = self.generation.llm.generate([{"prompt_token_ids": request["prompt"]}],
                                                     sampling_params=params, use_tqdm=False)
            output = result.outputs[0]
            ids = [int(i) for i in output.token_ids]
            return ids, [float(step[t].logprob) for step, t in zip(output.logprobs, ids)]

    def _generate_many(self, requests: list[dict[str, Any]]) -> list[tuple[list[int], list[float]]]:
        """The server's answers, in order: one ``vllm_client.generate`` call per distinct
        sampling setting (stops and token caps differ between turns and envs).  Main process
        only: the other ranks have no client."""
        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault(_setting(r), []).append(i)
        out: list[Any] = [None] * len(requests)
        for setting, members in groups.items():
            stop, max_tokens, temperature, top_p, top_k = setting
            got = self.generation.vllm_client.generate(
                prompts=[requests[i]["prompt"] for i in members], n=1, temperature=temperature,
                top_p=top_p, top_k=top_k, max_tokens=max_tokens, logprobs=0,
                generation_kwargs={"stop": list(stop), "include_stop_str_in_output": True})
            for j, i in enumerate(members):
                out[i] = ([int(t) for t in got["completion_ids"][j]],
                          [float(step[0]) for step in got["logprobs"][j]])
        return out


def _request(prompt: list[int], stop: list[str], sampling: SamplingParams) -> dict[str, Any]:
    return {"prompt": prompt, "stop": stop, "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature, "top_p": sampling.top_p, "top_k": sampling.top_k}


def _setting(request: dict[str, Any]) -> tuple:
    return (tuple(request["stop"]), request["max_tokens"], request["temperature"],
            request["top_p"], request["top_k"])
