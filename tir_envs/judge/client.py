"""The judge model's client: any policy backend, batched, bounded, timed, retried, cached.

The judge is reached through the same ``Policy.generate`` every backend implements (vLLM,
transformers, an OpenAI-compatible server, a scripted one in tests), with its own family's
chat rendering (``tir_envs.chat``) and its own sampling settings; it is never the policy being
trained.  All calls run on the client's own event loop (one daemon thread): rewards are scored
from env threads (``TIREnv.aoutcome``), trainers and benchmarks from theirs, and every one of
them shares one concurrency bound, one cache and one set of counters.  Calls that arrive
together are in flight together (a vLLM or HTTP backend batches them); ``max_concurrency``
caps how many.

A call that raises or passes ``timeout_s`` is retried ``retries`` times with backoff; then it
is a judge *error*.  A verdict out of format is a judge *failure* and is not retried (retrying
a derailed judge at a temperature would hand the policy another draw).  Both pay 0.

The cache is keyed by (rubric, task, answers, mode, judge settings): the same answer to the
same task is judged once per run, and a second request for it while the first is in flight
waits for that one.  Transport errors are not cached.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Sequence

from tir_envs.codec import Codec
from tir_envs.judge.prompt import SAFE, PromptBuilder, PromptStyle
from tir_envs.judge.rubric import Rubric
from tir_envs.judge.verdict import VerdictError, parse_verdict
from tir_envs.rollout.policy import SamplingParams


@dataclass
class Judgement:
    """One judge call's outcome, for the answers in the order they were given.

    ``scores``: normalised 0..1 per answer, ``None`` when the judge failed (``failure``: the
    reason) or errored (``error``).  ``exchange``: the prompt and the judge's raw output, for
    the trajectory's record.
    """

    scores: list[float] | None
    labels: list[str]
    failure: str | None = None
    error: str | None = None
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    attempts: int = 0
    exchange: dict[str, str] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class JudgeStats:
    """Counters for the run's report: calls made, cache use, failures, tokens, time."""

    requests: int = 0
    calls: int = 0
    cache_hits: int = 0
    failures: int = 0
    errors: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    call_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["cache_hit_rate"] = self.cache_hits / self.requests if self.requests else 0.0
        out["tokens"] = self.prompt_tokens + self.completion_tokens
        return out


class JudgeClient:
    """A judge model behind a policy backend (see the module docstring).

    ``tokenizer``: the judge's (its family picks the renderer; ``renderer=`` names one).
    ``sampling``: the judge's settings (default: greedy, 512 new tokens).  ``style``: the
    prompt's defences (``tir_envs.judge.prompt``; only tests weaken it).
    """

    def __init__(self, policy: Any, tokenizer: Any, renderer: Any = None,
                 thinking: str | None = None, sampling: SamplingParams | None = None,
                 max_concurrency: int = 16, timeout_s: float = 120.0, retries: int = 2,
                 backoff_s: float = 0.5, cache_size: int = 20_000,
                 style: PromptStyle = SAFE, name: str | None = None):
        from tir_envs.chat.registry import resolve_renderer
        from tir_envs.tokenizer import load_tokenizer

        if max_concurrency < 1 or retries < 0 or timeout_s <= 0 or cache_size < 0:
            raise ValueError("max_concurrency >= 1, retries >= 0, timeout_s > 0 and "
                             "cache_size >= 0 are required")
        if not callable(getattr(policy, "generate", None)):
            raise TypeError("policy must be a tir_envs policy backend (async generate("
                            f"prompt_ids, stop, sampling)); got {type(policy).__name__}")
        self.policy = policy
        self.tokenizer = load_tokenizer(tokenizer)
        self.codec = Codec(self.tokenizer)
        self.renderer = resolve_renderer(self.tokenizer, self.codec, renderer, thinking,
                                         role="user")
        base = sampling or SamplingParams(max_tokens=512, temperature=0.0)
        self.sampling = replace(base, stop_token_ids=tuple(base.stop_token_ids)
                                or tuple(self.renderer.stop_token_ids()))
        self.prompts = PromptBuilder(self.renderer, self.codec, style)
        self.max_concurrency, self.timeout_s = max_concurrency, timeout_s
        self.retries, self.backoff_s, self.cache_size = retries, backoff_s, cache_size
        self.name = name or type(policy).__name__
        self.stats = JudgeStats()
        self._cache: OrderedDict[str, Judgement] = OrderedDict()
        self._inflight: dict[str, asyncio.Future] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._start = threading.Lock()

    # a judge is shared, never copied (an env deep-copied per worker keeps one judge)
    def __copy__(self) -> "JudgeClient":
        return self

    def __deepcopy__(self, memo: dict) -> "JudgeClient":
        return self

    def settings(self) -> dict[str, Any]:
        """What besides the inputs decides a verdict: part of every cache key."""
        s = self.sampling
        return {"judge": self.name, "renderer": self.renderer.describe(),
                "style": self.prompts.style.name, "max_tokens": s.max_tokens,
                "temperature": s.temperature, "top_p": s.top_p, "top_k": s.top_k,
                "seed": s.seed}

    def key(self, rubric: Rubric, question: str, reference: str | None,
            answers: Sequence[str], mode: str) -> str:
        spec = [rubric.fingerprint(), question, reference, list(answers), mode, self.settings()]
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()

    # ------------------------------------------------------------------ calling
    def judge(self, rubric: Rubric, question: str, reference: str | None,
              answers: Sequence[str], mode: str = "pointwise") -> Judgement:
        """``ajudge`` from sync code (an env's reward thread)."""
        if threading.current_thread().name == "judge-loop":
            raise RuntimeError("JudgeClient.judge blocks until the client's own loop answers, "
                               "so it cannot run on that loop: await ajudge there")
        coro = self._judge(rubric, question, reference, list(answers), mode)
        return asyncio.run_coroutine_threadsafe(coro, self.loop()).result()

    async def ajudge(self, rubric: Rubric, question: str, reference: str | None,
                     answers: Sequence[str], mode: str = "pointwise") -> Judgement:
        """One judge call over ``answers`` (one for pointwise, a group's for grouped)."""
        coro = self._judge(rubric, question, reference, list(answers), mode)
        return await asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(coro, self.loop()))

    async def _judge(self, rubric, question, reference, answers, mode) -> Judgement:
        self.stats.requests += 1
        key = self.key(rubric, question, reference, answers, mode)
        if key in self._cache:
            self._cache.move_to_end(key)
            self.stats.cache_hits += 1
            return replace(self._cache[key], cached=True, prompt_tokens=0,
                           completion_tokens=0, seconds=0.0, attempts=0)
        if key in self._inflight:
            self.stats.cache_hits += 1
            done = await asyncio.shield(self._inflight[key])
            return replace(done, cached=True, prompt_tokens=0, completion_tokens=0,
                           seconds=0.0, attempts=0)
        future = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            result = await self._call(rubric, question, reference, answers, mode)
            if result.error is None and self.cache_size:
                self._cache[key] = result
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
            future.set_result(result)
            return result
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it, nobody logs it unretrieved
            raise
        finally:
            del self._inflight[key]

    async def _call(self, rubric, question, reference, answers, mode) -> Judgement:
        built = self.prompts.build(rubric, question, reference, answers, mode)
        exchange = {"system": built.system, "user": built.user, "output": ""}
        out = Judgement(None, built.labels, exchange=exchange, prompt_tokens=len(built.ids))
        t0 = time.perf_counter()
        for attempt in range(self.retries + 1):
            out.attempts = attempt + 1
            if attempt:
                self.stats.retries += 1
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                async with self._semaphore:
                    self.stats.calls += 1
                    self.stats.prompt_tokens += len(built.ids)
                    gen = await asyncio.wait_for(
                        self.policy.generate(built.ids, [], self.sampling), self.timeout_s)
            except Exception as exc:  # noqa: BLE001 - any backend failure is the judge's
                out.error = f"{type(exc).__name__}: {exc}"[:500]
                continue
            out.error = None
            break
        out.seconds = time.perf_counter() - t0
        self.stats.call_seconds += out.seconds
        if out.error is not None:
            self.stats.errors += 1
            return out
        text = gen.text if gen.text is not None else self.codec.decode(gen.token_ids)
        out.completion_tokens = len(gen.token_ids)
        self.stats.completion_tokens += out.completion_tokens
        exchange["output"] = text
        try:
            out.scores = parse_verdict(text, mode, rubric.scale, built.labels, gen.finish_reason)
        except VerdictError as exc:
            out.failure = str(exc)
            self.stats.failures += 1
        return out

    # ------------------------------------------------------------------ the loop
    def loop(self) -> asyncio.AbstractEventLoop:
        """The client's event loop (started on first use, on a daemon thread)."""
        with self._start:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    self._semaphore = asyncio.Semaphore(self.max_concurrency)
                    ready.set()
                    loop.run_forever()
                    loop.close()

                threading.Thread(target=run, name="judge-loop", daemon=True).start()
                ready.wait()
                self._loop = loop
            return self._loop

    def close(self) -> None:
        """Stop the client's loop (the cache and counters stay; a later call starts it again)."""
        with self._start:
            loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            closer = getattr(self.policy, "aclose", None)
            if closer is not None:
                asyncio.run_coroutine_threadsafe(closer(), loop).result(timeout=30)
            loop.call_soon_threadsafe(loop.stop)
