"""Generation through an OpenAI-compatible completions server (e.g. ``vllm serve``).

Token in, token out where the server allows it: the prompt is sent as token ids, and the
action's ids come back from ``choices[0].token_ids`` (vLLM's ``return_token_ids``) or from the
logprob entries when the server writes tokens as ``token_id:N`` (vLLM's
``return_tokens_as_token_ids``).  A server that can only return text still works: the text is
handed to the env as a string action, which encodes it and records the trajectory as
retokenized with its drift (``Trajectory.retokenized``/``drift``), so a trainer can tell.

The request asks for the stop string to be kept in the output (vLLM's
``include_stop_str_in_output``); for text from a server that strips it, the matched stop
string is put back when the server names it (``stop_reason``) or when only one was asked for.
"""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any, Sequence

from tir_envs.rollout.policy import Generation, PolicyError, SamplingParams
from tir_envs.tokenizer import load_tokenizer
from tir_envs.codec import Codec

_TOKEN_PREFIX = "token_id:"


class ServerError(PolicyError):
    """The server answered with an error, with something that is not a completion, or not at
    all (connection refused, no answer within ``request_timeout_s``)."""


class OpenAIPolicy:
    """Policy over ``POST {base_url}/completions`` (see the module docstring).

    Args:
      base_url: e.g. ``http://127.0.0.1:8000/v1``; several (a list, or one string of
        comma-separated URLs: one server per node) spread the requests: each goes to the
        endpoint with the fewest requests in flight, and a retry after a connection error or
        a 5xx goes to the next one.  Every endpoint must serve the same model.
      model: the served model name.
      tokenizer: the env's tokenizer (and the server's: the ids must mean the same).
      api_key: sent as a bearer token, if given.
      token_prompts: send prompts as token ids (``False``: as text, for servers without
        token-id prompts; the prompt then passes through the server's tokenizer).
      request_timeout_s: per request; retries: extra attempts on connection errors, request
        timeouts and 5xx.  When they are spent the call raises ``ServerError`` (a
        ``PolicyError``: the engine flags the episode ``policy_error``, never ``timeout``).
      max_connections: concurrent HTTP connections to the server.
      extra_body: merged into every request (server-specific sampling options).
    """

    def __init__(self, base_url: str | Sequence[str], model: str, tokenizer: Any = None,
                 api_key: str | None = None,
                 token_prompts: bool = True, request_timeout_s: float = 600.0, retries: int = 2,
                 max_connections: int = 256, extra_body: dict[str, Any] | None = None):
        urls = base_url.split(",") if isinstance(base_url, str) else list(base_url)
        urls = [u.strip() for u in urls if isinstance(u, str) and u.strip()]
        bad = [u for u in urls if not u.startswith(("http://", "https://"))]
        if not urls or bad:
            raise ValueError(f"base_url must be an http(s) URL such as http://127.0.0.1:8000/v1 "
                             f"(or several), got {base_url!r}")
        if not model:
            raise ValueError("model must name the served model (the server's --served-model-name)")
        if importlib.util.find_spec("aiohttp") is None:
            raise ImportError("the OpenAI-compatible policy needs aiohttp: "
                              "pip install 'tir-envs[openai]'")
        self.urls = [u.rstrip("/") + "/completions" for u in urls]
        self.url = self.urls[0]
        self.in_flight = [0] * len(self.urls)
        self.sent = [0] * len(self.urls)  # requests per endpoint, for tests and benchmarks
        self._turn = 0
        self.model = model
        self.tokenizer = load_tokenizer(tokenizer)
        self.codec = Codec(self.tokenizer)
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.token_prompts = token_prompts
        self.request_timeout_s = request_timeout_s
        self.retries = retries
        self.max_connections = max_connections
        self.extra_body = dict(extra_body or {})
        self._session: Any = None
        self._session_loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------ HTTP
    async def _client(self):
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._session_loop is not loop:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.max_connections),
                timeout=aiohttp.ClientTimeout(total=self.request_timeout_s), headers=self.headers)
            self._session_loop = loop
        return self._session

    async def aclose(self) -> None:
        """Close the HTTP session bound to the current event loop (the policy stays usable)."""
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    def _pick(self, avoid: int | None = None) -> int:
        """The endpoint with the fewest requests in flight (round robin among equals; not
        ``avoid``, the one that just failed, when there is another)."""
        n = len(self.urls)
        order = [(self._turn + i) % n for i in range(n)]
        if avoid is not None and n > 1:
            order.remove(avoid)
        self._turn = (self._turn + 1) % n
        return min(order, key=lambda i: self.in_flight[i])

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        import aiohttp

        tries = self.retries + 1
        failed: int | None = None
        for attempt in range(tries):
            i = self._pick(failed)
            url = self.urls[i]
            self.in_flight[i] += 1
            self.sent[i] += 1
            try:
                session = await self._client()
                async with session.post(url, json=body) as resp:
                    if resp.status >= 500 and attempt < self.retries:
                        failed = i
                        await asyncio.sleep(0.2 * 2 ** attempt)
                        continue
                    if resp.status != 200:
                        raise ServerError(f"{url} answered HTTP {resp.status}: "
                                          f"{(await resp.text())[:500]}")
                    return await resp.json(content_type=None)
            except asyncio.TimeoutError as exc:  # aiohttp's timeouts are TimeoutErrors
                if attempt == self.retries:
                    raise ServerError(f"{url} did not answer within request_timeout_s="
                                      f"{self.request_timeout_s} ({tries} attempt(s)); raise "
                                      "request_timeout_s or check the server") from exc
            except aiohttp.ClientConnectionError as exc:
                if attempt == self.retries:
                    raise ServerError(f"cannot reach {url} ({tries} attempt(s)): "
                                      f"{type(exc).__name__}: {exc}") from exc
            finally:
                self.in_flight[i] -= 1
            failed = i
            await asyncio.sleep(0.2 * 2 ** attempt)
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ policy
    def request_body(self, prompt_ids: Sequence[int], stop: Sequence[str],
                     sampling: SamplingParams) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": [int(i) for i in prompt_ids] if self.token_prompts
            else self.codec.decode(prompt_ids),
            "max_tokens": sampling.max_tokens, "temperature": sampling.temperature,
            "top_p": sampling.top_p, "stop": list(stop), "logprobs": 1,
            # vLLM extensions (other servers ignore unknown fields or reject them; see extra_body)
            "include_stop_str_in_output": True, "return_token_ids": True,
            "return_tokens_as_token_ids": True, "skip_special_tokens": False,
        }
        if sampling.top_k is not None and sampling.top_k > 0:
            body["top_k"] = sampling.top_k
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.stop_token_ids:  # vLLM's extension; the cut is made here too (parse_choice)
            body["stop_token_ids"] = list(sampling.stop_token_ids)
        return {**body, **sampling.extra, **self.extra_body}

    async def generate(self, prompt_ids: Sequence[int], stop: Sequence[str],
                       sampling: SamplingParams) -> Generation:
        data = await self._post(self.request_body(prompt_ids, stop, sampling))
        try:
            choice = data["choices"][0]
        except (KeyError, IndexError, TypeError) as exc:
            raise ServerError(f"{self.url} returned no choices: {str(data)[:500]}") from exc
        return self.parse_choice(choice, stop, sampling.stop_token_ids)

    def parse_choice(self, choice: dict[str, Any], stop: Sequence[str],
                     stop_token_ids: Sequence[int] = ()) -> Generation:
        """A ``Generation`` from one completion choice: ids if the server gave them, else text."""
        finish = choice.get("finish_reason") or "stop"
        stop_reason = choice.get("stop_reason") if isinstance(choice.get("stop_reason"), str) \
            else None
        lp = choice.get("logprobs") or {}
        logprobs = lp.get("token_logprobs")
        ids = choice.get("token_ids")
        tokens = lp.get("tokens")
        if ids is None and tokens and all(isinstance(t, str) and t.startswith(_TOKEN_PREFIX)
                                          for t in tokens):
            ids = [int(t[len(_TOKEN_PREFIX):]) for t in tokens]
        if ids is not None:
            ids = [int(i) for i in ids]
            if logprobs is None or len(logprobs) != len(ids) or any(x is None for x in logprobs):
                logprobs = None
            end = next((k + 1 for k, t in enumerate(ids) if t in set(stop_token_ids)), len(ids))
            if end < len(ids):  # a server that ignored stop_token_ids: cut at the first one
                ids, finish = ids[:end], "stop"
                logprobs = logprobs[:end] if logprobs is not None else None
            return Generation(ids, logprobs, finish, stop_reason, text=self.codec.decode(ids))
        text = choice.get("text")
        if not isinstance(text, str):
            raise ServerError("completion choice has neither token ids nor text: "
                              f"{str(choice)[:300]}")
        if finish == "stop":
            matched = stop_reason or (stop[0] if len(stop) == 1 else None)
            if matched and not text.endswith(matched):
                text += matched  # the server stripped the stop string; the action includes it
        return Generation(self.codec.encode(text), None, finish, stop_reason, text=text,
                          retokenized=True)
