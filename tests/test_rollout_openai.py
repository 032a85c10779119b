"""The OpenAI-compatible backend against a small completions server started on 127.0.0.1.

The server is a real aiohttp HTTP server in a thread.  Its "model" replays a script over the
real Qwen2.5 tokenizer and answers in one of three styles: token ids in the choice (vLLM's
``return_token_ids``), ids only inside the logprob entries (``token_id:N``), or text only with
the stop string stripped (a plain OpenAI-style server).
"""

from __future__ import annotations

import asyncio

import pytest

aiohttp = pytest.importorskip("aiohttp")
from aiohttp import web  # noqa: E402

from tests.fixtures.background_server import BackgroundServer  # noqa: E402
from tests.fixtures.rollout_envs import LookupEnv  # noqa: E402
from tir_envs.formats.tags import TagsFormat  # noqa: E402
from tir_envs.rollout.engine import collect  # noqa: E402
from tir_envs.rollout.openai_compat import OpenAIPolicy, ServerError  # noqa: E402
from tir_envs.rollout.policy import SamplingParams  # noqa: E402
from tir_envs.rollout.stops import cut_at_stop  # noqa: E402
from tir_envs.codec import Codec  # noqa: E402

TASKS = [{"id": "a", "question": "first?", "answer": "42"}]


class FakeServer(BackgroundServer):
    """A completions endpoint in a background thread; ``style`` picks how it answers."""

    def __init__(self, tokenizer, style: str = "ids", split_ids: bool = False):
        super().__init__()
        self.codec = Codec(tokenizer)
        self.style = style
        self.split_ids = split_ids  # answer with a valid but non-canonical split of the text
        self.requests: list[dict] = []
        self.fail_next = 0
        self.stall_s = 0.0  # wait this long before answering (a server that hangs)

    def script(self, context: str) -> str:
        if "</information>" in context:
            return "\n<answer>42</answer><|im_end|>"
        return "<search>paris</search> and more"

    def encode(self, text: str) -> list[int]:
        if not self.split_ids:
            return self.codec.encode(text)
        # one id per character where possible: the same text, different (longer) ids
        return [i for ch in text for i in self.codec.encode(ch)]

    async def completions(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        if self.stall_s:
            await asyncio.sleep(self.stall_s)
        if self.fail_next:
            self.fail_next -= 1
            return web.Response(status=503, text="overloaded")
        if not isinstance(body["prompt"], list):
            return web.json_response({"error": "expected token ids"}, status=400)
        context = self.codec.decode(body["prompt"])
        ids = self.encode(self.script(context))
        cut = cut_at_stop(ids, self.codec.decode, body["stop"], max_tokens=body["max_tokens"])
        ids = ids[:cut.length]
        logprobs = [-0.1 * (k + 1) for k in range(len(ids))]
        choice = {"index": 0, "finish_reason": cut.finish_reason, "stop_reason": cut.stop_reason}
        if self.style == "ids":
            choice.update(text=self.codec.decode(ids), token_ids=ids,
                          logprobs={"token_logprobs": logprobs, "tokens": ["?"] * len(ids)})
        elif self.style == "logprob_tokens":
            choice.update(text=self.codec.decode(ids), logprobs={
                "token_logprobs": logprobs, "tokens": [f"token_id:{i}" for i in ids]})
        else:  # text only, stop string stripped, no stop_reason: a plain OpenAI-style server
            text = self.codec.decode(ids)
            if cut.stop_reason:
                text = text[:text.rfind(cut.stop_reason)]
            choice.update(text=text.replace("<|im_end|>", ""), stop_reason=None)
        return web.json_response({"id": "cmpl-1", "object": "text_completion",
                                  "choices": [choice]})


@pytest.mark.parametrize("style", ["ids", "logprob_tokens"])
def test_token_ids_round_trip_exactly_through_the_server(qwen_tok, style):
    with FakeServer(qwen_tok, style, split_ids=True) as server:
        policy = OpenAIPolicy(server.url, "tiny", qwen_tok)
        out = collect(LookupEnv, policy, TASKS, samples_per_task=2, progress=False,
                      sampling=SamplingParams(max_tokens=64, temperature=0.5, seed=3))
    for t in out:
        assert t.reward == 1.0 and not t.retokenized and t.drift == 0 and t.has_logprobs
        first = t.token_ids[slice(*t.turns[0].action_span)]
        # the server's non-canonical ids are kept as sent, never re-encoded
        assert first == server.encode("<search>paris</search>")
        assert first != qwen_tok.encode("<search>paris</search>", add_special_tokens=False)
        assert t.logprobs[:3] == pytest.approx([-0.1, -0.2, -0.3])
    first_request = server.requests[0]
    assert first_request["prompt"] == out[0].prompt_ids  # the prompt went as token ids
    assert first_request["include_stop_str_in_output"] is True
    assert set(first_request["stop"]) >= {"</search>", "</python>"}
    assert {r["seed"] for r in server.requests} == {3, 4}  # one seed per episode


def test_text_only_server_falls_back_to_text_and_records_drift(qwen_tok):
    with FakeServer(qwen_tok, "text") as server:
        # one stop string only, so the stripped stop can be put back without a stop_reason
        env = lambda: LookupEnv(tool_format=TagsFormat(tools=["search"]))  # noqa: E731
        policy = OpenAIPolicy(server.url, "tiny", qwen_tok)
        gen = asyncio.run(_one(policy, qwen_tok.encode("<|im_start|>assistant\n"), ["</search>"]))
        assert gen.retokenized and gen.text == "<search>paris</search>" and gen.logprobs is None
        out = collect(env, policy, TASKS, progress=False)
    t = out[0]
    assert t.retokenized
    assert t.drift > 0  # "\n" after the observation's "\n" encodes differently in one piece
    assert "found" in qwen_tok.decode(t.token_ids)


async def _one(policy, prompt, stop):
    try:
        return await policy.generate(prompt, stop, SamplingParams(max_tokens=32))
    finally:
        await policy.aclose()


def test_retries_a_busy_server_then_reports_errors_as_flagged_episodes(qwen_tok):
    with FakeServer(qwen_tok, "ids") as server:
        server.fail_next = 1
        policy = OpenAIPolicy(server.url, "tiny", qwen_tok, retries=1)
        ok = collect(LookupEnv, policy, TASKS, progress=False)[0]
        assert ok.reward == 1.0 and len(server.requests) == 3  # 503, retry, second turn
        server.fail_next = 10
        failed = collect(LookupEnv, policy, TASKS, progress=False)[0]
    assert failed.infra_failed and "HTTP 503" in failed.metadata["failure"]["message"]


def test_unreachable_server_is_an_infra_failure(qwen_tok):
    policy = OpenAIPolicy("http://127.0.0.1:9/v1", "tiny", qwen_tok, retries=0,
                          request_timeout_s=5)
    out = collect(LookupEnv, policy, TASKS, progress=False)
    assert out[0].infra_failed and out[0].stop_reason == "policy_error"
    assert "cannot reach http://127.0.0.1:9/v1" in out[0].metadata["failure"]["message"]


@pytest.mark.parametrize("episode_timeout_s", [None, 60.0])
def test_a_request_timeout_is_the_policys_failure_not_an_episode_timeout(qwen_tok,
                                                                        episode_timeout_s):
    with FakeServer(qwen_tok, "ids") as server:
        server.stall_s = 3.0
        policy = OpenAIPolicy(server.url, "tiny", qwen_tok, retries=1, request_timeout_s=0.3)
        out = collect(LookupEnv, policy, TASKS, progress=False,
                      episode_timeout_s=episode_timeout_s)
    t = out[0]
    assert t.infra_failed and t.stop_reason == "policy_error"
    assert t.metadata["failure"]["kind"] == "policy_error"
    assert "did not answer within request_timeout_s=0.3 (2 attempt(s))" in \
        t.metadata["failure"]["message"]
    assert out.stats.policy_errors == 1 and out.stats.timeouts == 0 and out.stats.errors == 0
    assert len(server.requests) == 2  # the request, then one retry


def test_bad_arguments_and_bad_answers_are_named(qwen_tok):
    with pytest.raises(ValueError, match="base_url"):
        OpenAIPolicy("127.0.0.1:8000", "m", qwen_tok)
    with pytest.raises(ValueError, match="model"):
        OpenAIPolicy("http://127.0.0.1:8000/v1", "", qwen_tok)
    policy = OpenAIPolicy("http://127.0.0.1:8000/v1", "m", qwen_tok)
    with pytest.raises(ServerError, match="neither token ids nor text"):
        policy.parse_choice({"finish_reason": "stop"}, [])
