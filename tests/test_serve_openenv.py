"""``tir-envs serve openenv``: a registered env behind OpenEnv's own server, driven by OpenEnv's
own client (HTTP and WebSocket, concurrent sessions), token-exact against a local env."""

from __future__ import annotations

import asyncio
import json
import sys
import urllib.request

import pytest

pytest.importorskip("openenv", reason="the openenv extra is part of make test")

from openenv.core import GenericEnvClient  # noqa: E402

from tests.mcp_helpers import free_port  # noqa: E402
from tests.openenv_helpers import CAPITALS_MODULE, TASKS, start, stop  # noqa: E402
from tir_envs.tokenizer import tokenizer_pin  # noqa: E402


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("openenv")
    (folder / "capitals_tools.py").write_text(CAPITALS_MODULE)
    (folder / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    port = free_port()
    proc = start([sys.executable, "-m", "tir_envs.cli", "serve", "openenv", "tir/ToolUse-v0",
                  "--env-arg", f"tasks={folder / 'tasks.jsonl'}", "--env-arg",
                  'tools=["capitals_tools:capital"]', "--port", str(port),
                  "--max-sessions", "4"], folder, port)
    sys.path.insert(0, str(folder))
    yield f"http://127.0.0.1:{port}", folder
    sys.path.remove(str(folder))
    sys.modules.pop("capitals_tools", None)
    stop(proc)


def local_env(folder):
    import tir_envs
    return tir_envs.make("tir/ToolUse-v0", tasks=str(folder / "tasks.jsonl"),
                         tools=["capitals_tools:capital"]).unwrapped


def get(url):
    return json.loads(urllib.request.urlopen(url, timeout=30).read())


def test_http_metadata_pins_the_tokenizer_and_schema_is_typed(served):
    url, folder = served
    meta = get(f"{url}/metadata")
    env = local_env(folder)
    assert meta["name"] == "tir/ToolUse-v0"
    assert json.loads(meta["readme_content"])["tokenizer"] == tokenizer_pin(env.tokenizer)
    schema = get(f"{url}/schema")
    assert "tokens" in schema["action"]["properties"]
    for field in ("tokens", "ledger_loss_mask", "stop_token_ids", "stop_sequences"):
        assert field in schema["observation"]["properties"]
    env.close()


def test_http_reset_returns_the_prompt(served):
    url, folder = served
    req = urllib.request.Request(f"{url}/reset", data=b'{"index": 1}',
                                 headers={"Content-Type": "application/json"})
    body = json.loads(urllib.request.urlopen(req, timeout=60).read())
    env = local_env(folder)
    obs, _ = env.reset(options={"index": 1})
    assert body["observation"]["tokens"] == obs["tokens"].tolist()
    env.close()


def test_websocket_episode_is_token_exact(served):
    url, folder = served
    env = local_env(folder)
    call = env.codec.encode(env.protocol.render_call("capital", "France"))
    answer = env.codec.encode("<answer>Paris</answer>")
    local_obs, _ = env.reset(options={"index": 0})
    local_step = env.step(call)
    *_, local_info = env.step(answer)
    traj = local_info["trajectory"]

    async def remote():
        async with GenericEnvClient(base_url=url) as client:
            first = await client.reset(index=0)
            second = await client.step({"tokens": call})
            third = await client.step({"tokens": answer})
            return first, second, third
    first, second, third = asyncio.run(remote())
    assert first.observation["tokens"] == local_obs["tokens"].tolist()
    assert first.observation["stop_sequences"] == ["</tool_call>"]
    assert env.tokenizer.eos_token_id in first.observation["stop_token_ids"]
    assert second.observation["tokens"] == local_step[0]["tokens"].tolist()
    assert second.observation["turn_status"] == "ok" and not second.done
    assert third.done and third.reward == 1.0 and third.observation["correct"] is True
    assert third.observation["ledger_token_ids"] == traj.token_ids
    assert third.observation["ledger_loss_mask"] == traj.loss_mask
    env.close()


def test_concurrent_sessions_are_independent(served):
    url, folder = served
    env = local_env(folder)

    async def episode(index, country, reply):
        async with GenericEnvClient(base_url=url) as client:
            await client.reset(index=index)
            r = await client.step({"text": env.protocol.render_call("capital", country)})
            assert reply in r.observation["text"]
            r = await client.step({"text": f"<answer>{reply}</answer>"})
            return r.reward

    async def both():
        return await asyncio.gather(episode(0, "France", "Paris"), episode(1, "Japan", "Tokyo"),
                                    episode(0, "Italy", "Rome"))
    assert asyncio.run(both()) == [1.0, 1.0, 0.0]  # Rome is not France's capital
    env.close()


def test_bad_action_is_an_error_response_and_the_session_lives_on(served):
    url, _ = served

    async def remote():
        async with GenericEnvClient(base_url=url) as client:
            await client.reset(index=0)
            with pytest.raises(RuntimeError, match="action ids must lie in"):
                await client.step({"tokens": [10 ** 9]})
            r = await client.step({"text": "<answer>Paris</answer>"})
            return r
    assert asyncio.run(remote()).reward == 1.0


def test_the_server_says_where_it_serves_and_stays_quiet_on_normal_closes(served):
    url, folder = served

    async def episode():
        async with GenericEnvClient(base_url=url) as client:
            await client.reset(index=0)
            await client.step({"text": "<answer>Paris</answer>"})
    for _ in range(3):
        asyncio.run(episode())
    import time
    time.sleep(1.0)  # let the server finish each close
    log = next(folder.glob("server-*.log")).read_text()
    assert f"serving tir/ToolUse-v0 over OpenEnv at {url}" in log
    assert "Traceback" not in log and "Exception in ASGI application" not in log, log[-3000:]


def test_a_foreign_origin_and_an_oversized_message_are_refused(served):
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed, InvalidStatus
    url, _ = served
    ws_url = url.replace("http://", "ws://") + "/ws"

    async def evil_page():
        async with connect(ws_url, origin="http://evil.example"):
            pass
    with pytest.raises(InvalidStatus, match="403"):
        asyncio.run(evil_page())

    async def flood():
        async with GenericEnvClient(base_url=url) as client:
            await client.reset(index=0)
            await client.step({"text": "x" * (12 << 20)})
    with pytest.raises((ConnectionClosed, ConnectionError, RuntimeError)):
        asyncio.run(flood())

    async def after():  # the server lives on for everyone else
        async with GenericEnvClient(base_url=url) as client:
            await client.reset(index=0)
            return await client.step({"text": "<answer>Paris</answer>"})
    assert asyncio.run(after()).reward == 1.0


def test_a_text_action_longer_than_any_that_fits_is_refused_before_tokenizing(served):
    url, _ = served

    async def long_text():
        async with GenericEnvClient(base_url=url) as client:
            await client.reset(index=0)
            with pytest.raises(RuntimeError, match="characters"):
                await client.step({"text": "y" * 600_000})
    asyncio.run(long_text())


def test_metadata_and_state_build_no_env():
    from tir_envs.serving.openenv_server import TIREnvironment
    built = []
    session = TIREnvironment(lambda: built.append(1), "tir/ToolUse-v0", {"name": "t"})
    assert session.get_metadata().name == "tir/ToolUse-v0" and session.state.env_id
    session.close()
    assert not built


def test_a_long_text_action_is_tokenized_off_the_loop(monkeypatch):
    """While one session's long text action is being tokenized, another session's text step
    runs to its end: the tokenizer holds the big action (until the bystander is done) on a
    worker thread, not on the loop every session shares, and the bystander's short text does
    not wait for the thread slot the big one holds (one slot, as on a 2-core machine)."""
    import threading

    import tir_envs
    from tests.hostile_tools import instant
    from tir_envs.serving import openenv_server
    from tir_envs.serving.openenv_server import TIREnvironment, TokenAction
    from tir_envs.tools.slots import Slots

    monkeypatch.setattr(openenv_server, "_TEXTS", Slots(1))

    def make():
        return tir_envs.make("tir/ToolUse-v0", tasks=TASKS, tools=[instant])
    big, bystander = (TIREnvironment(make, "tir/ToolUse-v0", {"name": "t"}) for _ in range(2))
    order: list[str] = []
    bystander_done = threading.Event()

    async def main():
        await big.reset_async(index=0)
        await bystander.reset_async(index=0)
        encode = big.env.codec.encode

        def slow_encode(text: str) -> list[int]:
            if len(text) > 10_000:  # the big action: held until the bystander has stepped
                bystander_done.wait(30)
                order.append("big tokenized")
            return encode(text)
        big.env.codec.encode = slow_encode
        text = "Let me think. " * 2_000 + "<answer>Paris</answer>"
        flood = asyncio.ensure_future(big.step_async(TokenAction(text=text)))
        await asyncio.sleep(0.05)  # the big action is under way
        out = await bystander.step_async(TokenAction(text="<answer>Paris</answer>"))
        order.append("bystander stepped")
        bystander_done.set()
        large = await flood
        assert big.env.trajectory.retokenized  # as the env records a text action
        # the long text's ids (the tokenizer's batch call, which lets go of the GIL) are the
        # tokenizer's own
        assert encode(text) == big.env.tokenizer.encode(text, add_special_tokens=False)
        return out, large
    try:
        small, large = asyncio.run(main())
    finally:
        big.close()
        bystander.close()
    assert order[:2] == ["bystander stepped", "big tokenized"]  # (then its drift, re-encoded)
    assert small.done and small.reward == 1.0 and large.done and large.reward == 1.0
