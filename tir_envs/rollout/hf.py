"""Generation with a local transformers model: CPU training loops, tests and small demos.

``HFPolicy`` generates from the model object it is given: no copy, so a trainer that updates
that model in place (``optimizer.step()``) is generating from the new weights on the next call,
with no weight sync.  Requests that arrive together (the engine's concurrent episodes) are
batched into one left-padded ``generate`` call on a worker thread, so the event loop keeps
running tool calls while the model computes.  With ``per_request_rng=True`` (what ``hf:``
policy specs build, for benchmarks) each request samples from its own random generator
(``_RowSampler``): a seeded request generates the same tokens whatever else shares its batch,
so results do not depend on concurrency or on a run being interrupted and resumed.  The
default draws a batch from one stream seeded with its first request's seed (reproducible when
the same requests meet in the same batches, as in a rerun of a training step).

Logprobs are those of the sampled tokens under the temperature-scaled distribution,
``log_softmax(logits / temperature)`` (plain ``log_softmax`` when greedy); top-p/top-k are not
folded in.  That is what a trainer recomputes from the same model to form PPO ratios.

Models often have more embedding rows than their tokenizer has tokens (Qwen2.5: 151,936 rows for
151,665 tokens, padded for fast kernels).  The padded rows mean nothing, and an untrained or
drifting model can put mass on them, so their logits are masked to -inf before sampling or
greedy choice, and logprobs are those of that masked distribution over the tokenizer's ids.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from dataclasses import dataclass
from typing import Any, Sequence

from transformers import LogitsProcessor, StoppingCriteria

from tir_envs.rollout.policy import Generation, SamplingParams
from tir_envs.rollout.stops import cut_at_stop, first_stop
from tir_envs.tokenizer import load_tokenizer
from tir_envs.codec import Codec
from tir_envs.validation import check_positive_int


@dataclass
class _Request:
    prompt_ids: list[int]
    stop: tuple[str, ...]
    sampling: SamplingParams
    future: asyncio.Future


def _batch_key(sampling: SamplingParams) -> tuple:
    """Requests may share a ``generate`` call when their sampling settings agree.

    ``max_tokens`` and ``seed`` may differ: each row is cut at its own cap; with per-request
    generators (``_RowSampler``) each row draws its own noise, otherwise a batch draws from
    one stream seeded with its first request's seed.
    """
    return (sampling.temperature, sampling.top_p, sampling.top_k,
            tuple(sorted(sampling.extra.items())))


class HFPolicy:
    """Policy over a ``transformers`` causal LM (see the module docstring).

    Args:
      model: a ``PreTrainedModel`` (used as is: same object, same device, same mode), or a local
        path loaded with ``AutoModelForCausalLM.from_pretrained``.
      tokenizer: the env's tokenizer (ids must mean the same to both); ``None`` tries the path,
        then the bundled Qwen2.5 tokenizer.
      max_batch_size: the most requests in one ``generate`` call.
      eos_token_ids: ids that end an action (default: the tokenizer's EOS and the model's).
      per_request_rng: each request samples from its own generator (module docstring).
    """

    def __init__(self, model: Any, tokenizer: Any = None, max_batch_size: int = 32,
                 eos_token_ids: Sequence[int] | None = None, per_request_rng: bool = False):
        if isinstance(model, str):
            from transformers import AutoModelForCausalLM
            tokenizer = tokenizer if tokenizer is not None else model
            model = AutoModelForCausalLM.from_pretrained(model)
        if not hasattr(model, "generate"):
            raise TypeError(f"model must be a transformers causal LM or a path; got "
                            f"{type(model).__name__}")
        check_positive_int(max_batch_size=max_batch_size)
        self.model = model
        self.tokenizer = load_tokenizer(tokenizer)
        self.codec = Codec(self.tokenizer)
        rows = _embedding_rows(model)
        if rows is not None and rows < self.vocab_size:
            raise ValueError(f"the model has {rows} embedding rows but the tokenizer has "
                             f"{self.vocab_size} tokens: this is not the model's tokenizer; pass "
                             "the model folder's own tokenizer")
        self.max_batch_size = max_batch_size
        self.per_request_rng = per_request_rng
        self.eos_token_ids = list(eos_token_ids) if eos_token_ids is not None else _eos_ids(
            self.tokenizer, model)
        self.pad_token_id = _pad_id(self.tokenizer, self.eos_token_ids)
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="hf-policy")
        self._pending: list[_Request] = []
        self._busy_loop: asyncio.AbstractEventLoop | None = None  # loop waiting on a batch
        self._kick_scheduled = False
        self.batches: list[int] = []  # sizes of the generate calls made (for tests/benchmarks)

    @property
    def vocab_size(self) -> int:
        """Ids this policy can generate: the tokenizer's, never the padded embedding rows."""
        return self.codec.vocab_size

    # ------------------------------------------------------------------ async API
    async def generate(self, prompt_ids: Sequence[int], stop: Sequence[str],
                       sampling: SamplingParams) -> Generation:
        if not len(prompt_ids):
            raise ValueError("prompt_ids is empty: the policy needs at least one prompt token")
        loop = asyncio.get_running_loop()
        request = _Request([int(i) for i in prompt_ids], tuple(stop), sampling,
                           loop.create_future())
        self._pending.append(request)
        if not self._kick_scheduled:  # let every request made in this loop tick join the batch
            self._kick_scheduled = True
            loop.call_soon(self._kick, loop)
        return await request.future

    def _kick(self, loop: asyncio.AbstractEventLoop) -> None:
        self._kick_scheduled = False
        if self._busy_loop is loop:
            return  # a batch is running; _finished starts the next one
        self._pending = [r for r in self._pending if not r.future.done()]  # drop cancelled
        if not self._pending:
            return
        key = _batch_key(self._pending[0].sampling)
        batch = [r for r in self._pending if _batch_key(r.sampling) == key][:self.max_batch_size]
        self._pending = [r for r in self._pending if r not in batch]
        self._busy_loop = loop
        work = loop.run_in_executor(self._executor, self.generate_batch,
                                    [r.prompt_ids for r in batch], [r.stop for r in batch],
                                    [r.sampling for r in batch])
        work.add_done_callback(lambda f: self._finished(loop, batch, f))

    def _finished(self, loop: asyncio.AbstractEventLoop, batch: list[_Request],
                  work: asyncio.Future) -> None:
        self._busy_loop = None
        error = work.exception() if not work.cancelled() else asyncio.CancelledError()
        for i, r in enumerate(batch):
            if r.future.done():
                continue
            if error is not None:
                r.future.set_exception(error)
            else:
                r.future.set_result(work.result()[i])
        self._kick(loop)

    # ------------------------------------------------------------------ batched generate
    def generate_batch(self, prompts: Sequence[Sequence[int]], stops: Sequence[Sequence[str]],
                       samplings: Sequence[SamplingParams]) -> list[Generation]:
        """One blocking, left-padded ``generate`` over several prompts (same sampling settings
        except ``max_tokens``).  Usable directly from synchronous code."""
        import torch

        s = samplings[0]
        device = _device(self.model)
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, p in enumerate(prompts):
            input_ids[row, width - len(p):] = torch.tensor(p, dtype=torch.long)
            attention[row, width - len(p):] = 1
        max_new = max(x.max_tokens for x in samplings)
        all_stops = sorted({x for st in stops for x in st if x})
        stop_ids = {i for x in samplings for i in x.stop_token_ids}
        kwargs = self._generate_kwargs(s, max_new, all_stops, width,
                                       [(x.seed, len(p)) for x, p in zip(samplings, prompts)],
                                       device)
        kwargs["eos_token_id"] = sorted({*self.eos_token_ids, *stop_ids})
        with torch.no_grad(), _seeded(None if self.per_request_rng else s.seed):
            out = self.model.generate(input_ids=input_ids.to(device),
                                      attention_mask=attention.to(device), **kwargs)
        new = out.sequences[:, width:].cpu()
        logprobs = _sampled_logprobs(out.logits, new, s.temperature, self.vocab_size)
        self.batches.append(len(prompts))
        return [self._to_generation(new[row].tolist(), logprobs[row].tolist(), stops[row],
                                    samplings[row].max_tokens, samplings[row].stop_token_ids)
                for row in range(len(prompts))]

    def _generate_kwargs(self, s: SamplingParams, max_new: int, stops: list[str],
                         prompt_width: int, rows: Sequence[tuple[int | None, int]],
                         device: Any) -> dict[str, Any]:
        from transformers import LogitsProcessorList, StoppingCriteriaList

        processors = [_MaskPadded(self.vocab_size)]
        own = self.per_request_rng and s.temperature > 0
        if own:  # hf's sampler draws from one stream for the whole batch; ours per row, handing
            # generate scores whose argmax *is* the sample (the Gumbel-max trick)
            processors.append(_RowSampler(s, rows, device))
        kwargs: dict[str, Any] = dict(
            max_new_tokens=max_new, do_sample=s.temperature > 0 and not own,
            eos_token_id=self.eos_token_ids,
            pad_token_id=self.pad_token_id, return_dict_in_generate=True, output_logits=True,
            stopping_criteria=StoppingCriteriaList([_StopStrings(self.codec, stops, prompt_width)]),
            logits_processor=LogitsProcessorList(processors),
        )
        if s.temperature > 0 and not own:
            kwargs.update(temperature=s.temperature, top_p=s.top_p,
                          top_k=0 if s.top_k is None or s.top_k < 0 else s.top_k)
        else:  # neutralise sampling defaults a model's generation_config may carry
            kwargs.update(temperature=None, top_p=None, top_k=None)
        kwargs.update(s.extra)
        return kwargs

    def _to_generation(self, ids: list[int], logprobs: list[float], stop: Sequence[str],
                       max_tokens: int, stop_ids: Sequence[int] = ()) -> Generation:
        cut = cut_at_stop(ids, self.codec.decode, stop, [*self.eos_token_ids, *stop_ids],
                          max_tokens)
        ids, logprobs = ids[:cut.length], logprobs[:cut.length]
        return Generation(ids, logprobs, cut.finish_reason, cut.stop_reason,
                          text=self.codec.decode(ids))

    def close(self) -> None:
        self._executor.shutdown(wait=False)


class _MaskPadded(LogitsProcessor):
    """Sets the logits of ids the tokenizer does not have (padded embedding rows) to -inf.

    Runs before temperature and top-p/top-k, so neither sampling nor greedy choice can pick
    them."""

    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size

    def __call__(self, input_ids, scores):
        if scores.shape[-1] > self.vocab_size:
            scores[:, self.vocab_size:] = float("-inf")
        return scores


class _RowSampler(LogitsProcessor):
    """Sampling with one random generator per row: each request's draws are its own.

    Each step applies temperature, top-k and top-p (transformers' own warpers), then adds
    Gumbel noise drawn from the row's generator; the greedy choice over the result is an exact
    sample of the warped distribution.  A row's generator is seeded from its request's seed and
    prompt length (two turns of one episode do not reuse one noise sequence); an unseeded
    request draws its generator's seed from torch's global RNG.
    """

    def __init__(self, s: SamplingParams, rows: Sequence[tuple[int | None, int]], device: Any):
        import torch
        from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

        self.warpers = [TemperatureLogitsWarper(s.temperature)]
        if s.top_k is not None and s.top_k > 0:
            self.warpers.append(TopKLogitsWarper(s.top_k))
        if s.top_p is not None and s.top_p < 1.0:
            self.warpers.append(TopPLogitsWarper(s.top_p))
        self.generators = []
        for seed, prompt_len in rows:
            if seed is None:
                seed = int(torch.randint(0, 2 ** 62, (1,)).item())
            else:
                seed = (int(seed) * 1_000_003 + prompt_len) % 2 ** 62
            self.generators.append(torch.Generator(device=device).manual_seed(seed))

    def __call__(self, input_ids, scores):
        import torch

        for warper in self.warpers:
            scores = warper(input_ids, scores)
        noise = torch.stack([torch.rand(scores.shape[-1], generator=g, device=scores.device,
                                        dtype=torch.float32) for g in self.generators])
        gumbel = -torch.log(-torch.log(noise.clamp_min(1e-20)))
        return scores.float() + gumbel


class _StopStrings(StoppingCriteria):
    """Stopping criterion: a row is done once its new text contains one of the stop strings.

    Only the tail is decoded each step (enough tokens to hold the longest stop string), so the
    cost does not grow with the generation.  The exact cut is made afterwards by ``cut_at_stop``.
    """

    def __init__(self, codec: Codec, stops: list[str], prompt_width: int):
        self.codec = codec
        self.stops = stops
        self.tail = max((len(s) for s in stops), default=0) + 2
        self.prompt_width = prompt_width

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        if not self.stops:
            return done
        start = max(self.prompt_width, input_ids.shape[1] - self.tail)
        for row, ids in enumerate(input_ids[:, start:].tolist()):
            done[row] = first_stop(self.codec.decode(ids), self.stops) is not None
        return done


def _sampled_logprobs(logits: Sequence[Any], tokens: Any, temperature: float, vocab_size: int):
    """``[batch, steps]`` log-probabilities of ``tokens`` under softmax(logits / T) over the
    first ``vocab_size`` ids (the raw ``logits`` still hold the padded rows)."""
    import torch

    scale = temperature if temperature > 0 else 1.0
    cols = []
    for t, step_logits in enumerate(logits):
        lp = torch.log_softmax(step_logits[:, :vocab_size].float().cpu() / scale, dim=-1)
        cols.append(lp.gather(1, tokens[:, t:t + 1]).squeeze(1))
    if not cols:
        return torch.zeros((tokens.shape[0], 0))
    return torch.stack(cols, dim=1)


class _seeded:
    """Seed torch's RNG for one call without disturbing the caller's (e.g. a trainer's) stream."""

    def __init__(self, seed: int | None):
        self.seed = seed
        self._fork = None

    def __enter__(self):
        if self.seed is not None:
            import torch
            self._fork = torch.random.fork_rng(devices=[])
            self._fork.__enter__()
            torch.manual_seed(self.seed)

    def __exit__(self, *exc):
        if self._fork is not None:
            self._fork.__exit__(*exc)


def _device(model: Any):
    try:
        return next(model.parameters()).device
    except (StopIteration, AttributeError):
        return "cpu"


def _embedding_rows(model: Any) -> int | None:
    try:
        return int(model.get_input_embeddings().weight.shape[0])
    except (AttributeError, TypeError, NotImplementedError):
        return None


def _eos_ids(tokenizer: Any, model: Any) -> list[int]:
    ids: list[int] = []
    for source in (getattr(tokenizer, "eos_token_id", None),
                   getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
        for i in source if isinstance(source, (list, tuple)) else [source]:
            if isinstance(i, int) and i not in ids:
                ids.append(i)
    if not ids:
        raise ValueError("no EOS token id: pass eos_token_ids=[...] or use a tokenizer with "
                         "eos_token set")
    return ids


def _pad_id(tokenizer: Any, eos: list[int]) -> int:
    pad = getattr(tokenizer, "pad_token_id", None)
    return pad if isinstance(pad, int) else eos[0]


__all__ = ["HFPolicy"]
