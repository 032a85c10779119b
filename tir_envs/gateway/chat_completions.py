"""OpenAI Chat Completions (``POST /v1/chat/completions``), JSON and streamed.

Request messages map one to one onto the neutral conversation (``developer`` is a system turn;
an assistant's ``reasoning_content`` or ``reasoning`` is its reasoning).  The reply carries the
family's reasoning as ``reasoning_content`` (what vLLM and DeepSeek's API send) and calls as
``tool_calls``; ``finish_reason`` is ``tool_calls`` when it made any.
"""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from tir_envs.gateway import sse
from tir_envs.gateway.conversation import (BadRequest, Message, arguments_object,
                                           function_tool, text_of)
from tir_envs.gateway.episode import Completion

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant",
         "tool": "tool", "function": "tool"}


def messages_of(body: dict[str, Any]) -> list[Message]:
    raw = body.get("messages")
    if not isinstance(raw, list):
        raise BadRequest("messages must be a list of chat messages")
    out = []
    for i, m in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise BadRequest(f"{where}: role must be one of {', '.join(ROLES)}")
        role = ROLES[m["role"]]
        msg: Message = {"role": role, "content": text_of(m.get("content"), where)}
        if role == "assistant":
            reasoning = m.get("reasoning_content", m.get("reasoning"))
            if isinstance(reasoning, str):
                msg["reasoning_content"] = reasoning
            calls = m.get("tool_calls") or []
            if calls:
                msg["tool_calls"] = [_call(c, f"{where}.tool_calls[{j}]")
                                     for j, c in enumerate(calls)]
        if role == "tool":
            msg["tool_call_id"] = m.get("tool_call_id") or ""
            if m.get("name"):
                msg["name"] = m["name"]
        out.append(msg)
    return out


def _call(call: Any, where: str) -> dict[str, Any]:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise BadRequest(f"{where}: a tool call needs function.name")
    return {"id": call.get("id") or "", "type": "function",
            "function": {"name": fn["name"],
                         "arguments": arguments_object(fn.get("arguments"), where)}}


def tools_of(body: dict[str, Any]) -> list[dict] | None:
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise BadRequest("tools must be a list")
    out = []
    for i, t in enumerate(tools):
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(fn, dict):
            raise BadRequest(f"tools[{i}]: only function tools are supported")
        out.append(function_tool(fn.get("name"), fn.get("description"), fn.get("parameters"),
                                 f"tools[{i}]"))
    return out or None


async def handle(gw: Any, episode: Any, body: dict, request: web.Request) -> web.StreamResponse:
    done = await episode.complete(messages_of(body), tools_of(body), body)
    cid = "chatcmpl-" + episode.key_id + str(episode.calls)
    model = body["model"]
    if not body.get("stream"):
        return web.json_response({
            "id": cid, "object": "chat.completion", "created": int(time.time()),
            "model": model, "system_fingerprint": None,
            "choices": [{"index": 0, "message": reply(done), "logprobs": None,
                         "finish_reason": done.finish_reason}],
            "usage": usage(done)})
    return await stream(request, done, cid, model,
                        bool((body.get("stream_options") or {}).get("include_usage")))


def reply(done: Completion) -> dict[str, Any]:
    p = done.parsed
    msg: dict[str, Any] = {"role": "assistant",
                           "content": p.content if p.content or not p.tool_calls else None}
    if p.reasoning is not None:
        msg["reasoning_content"] = p.reasoning
    if p.tool_calls:
        msg["tool_calls"] = [{"id": c["id"], "type": "function",
                              "function": {"name": c["name"], "arguments": c["arguments"]}}
                             for c in p.tool_calls]
    return msg


def usage(done: Completion) -> dict[str, int]:
    return {"prompt_tokens": done.prompt_tokens, "completion_tokens": done.completion_tokens,
            "total_tokens": done.prompt_tokens + done.completion_tokens}


async def stream(request: web.Request, done: Completion, cid: str, model: str,
                 include_usage: bool) -> web.StreamResponse:
    resp = await sse.open_stream(request)
    created = int(time.time())

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {"id": cid, "object": "chat.completion.chunk", "created": created,
                "model": model, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                             "finish_reason": finish}]}
    p = done.parsed
    try:
        await sse.send(resp, chunk({"role": "assistant", "content": ""}))
        if p.reasoning:
            await sse.send(resp, chunk({"reasoning_content": p.reasoning}))
        if p.content:
            await sse.send(resp, chunk({"content": p.content}))
        for i, c in enumerate(p.tool_calls):
            await sse.send(resp, chunk({"tool_calls": [{
                "index": i, "id": c["id"], "type": "function",
                "function": {"name": c["name"], "arguments": ""}}]}))
            await sse.send(resp, chunk({"tool_calls": [{
                "index": i, "function": {"arguments": c["arguments"]}}]}))
        await sse.send(resp, chunk({}, done.finish_reason))
        if include_usage:
            await sse.send(resp, {**chunk({}), "choices": [], "usage": usage(done)})
        await sse.send(resp, "[DONE]")
    except sse.ClientGone:
        return resp
    return await sse.close(resp)
