"""Anthropic Messages (``POST /v1/messages``, ``?beta=true`` too; ``/v1/messages/count_tokens``).

Blocks map onto the neutral conversation: an assistant's ``thinking`` blocks are its reasoning,
``tool_use`` its calls, ``text`` its content; a user's ``tool_result`` blocks become tool
messages (in order, before the user's own text).  Replies carry the family's reasoning as a
``thinking`` block whose ``signature`` is the gateway's own handle (an HMAC of the text under a
per-gateway secret, so a client that sends it back can be told apart from one that forged
reasoning: ``GatewayEpisode`` records unsigned reasoning), calls as ``tool_use`` blocks, and
stream with Anthropic's event types: ``message_start``, ``content_block_start``/``_delta``
(``thinking_delta``, ``signature_delta``, ``text_delta``, ``input_json_delta``)/``_stop``,
``message_delta``, ``message_stop``.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from aiohttp import web

from tir_envs.gateway import sse
from tir_envs.gateway.conversation import BadRequest, Message, arguments_object, \
    function_tool, text_of
from tir_envs.gateway.episode import Completion
from tir_envs.gateway.handles import sign, signed

STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def messages_of(body: dict[str, Any]) -> tuple[list[Message], int]:
    """The neutral conversation and how many thinking blocks came without our signature."""
    out: list[Message] = []
    system = body.get("system")
    if system:
        out.append({"role": "system", "content": text_of(system, "system")})
    raw = body.get("messages")
    if not isinstance(raw, list):
        raise BadRequest("messages must be a list of {role, content} messages")
    unsigned = 0
    for i, m in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant", "system"):
            raise BadRequest(f"{where}: role must be user or assistant")
        content = m.get("content")
        if m["role"] == "system":  # Claude Code puts one inside messages
            out.append({"role": "system", "content": text_of(content, where)})
            continue
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            raise BadRequest(f"{where}: content must be a string or a list of blocks")
        if m["role"] == "user":
            out += _user(blocks, where)
        else:
            msg, bad = _assistant(blocks, where)
            out.append(msg)
            unsigned += bad
    return out, unsigned


def _user(blocks: list, where: str) -> list[Message]:
    out: list[Message] = []
    text = []
    for j, b in enumerate(blocks):
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "tool_result":
            result = {"role": "tool", "tool_call_id": b.get("tool_use_id") or "",
                      "content": text_of(b.get("content"), f"{where}.content[{j}]")}
            if isinstance(b.get("is_error"), bool):  # the client's claim: metrics only
                result["is_error"] = b["is_error"]
            out.append(result)
        elif kind == "text":
            text.append(b.get("text") or "")
        else:
            raise BadRequest(f"{where}.content[{j}]: a user block of type {kind!r} is not "
                             "supported (text and tool_result are)")
    if text:
        out.append({"role": "user", "content": "".join(text)})
    return out


def _assistant(blocks: list, where: str) -> tuple[Message, int]:
    msg: Message = {"role": "assistant", "content": ""}
    text, thinking, calls, unsigned = [], [], [], 0
    for j, b in enumerate(blocks):
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "text":
            text.append(b.get("text") or "")
        elif kind == "thinking":
            thinking.append(b.get("thinking") or "")
            unsigned += not signed(b.get("thinking") or "", b.get("signature"))
        elif kind == "redacted_thinking":
            unsigned += 1
        elif kind == "tool_use":
            calls.append({"id": b.get("id") or "", "type": "function",
                          "function": {"name": b.get("name") or "", "arguments":
                                       arguments_object(b.get("input"),
                                                        f"{where}.content[{j}]")}})
        else:
            raise BadRequest(f"{where}.content[{j}]: an assistant block of type {kind!r} is "
                             "not supported (text, thinking, tool_use are)")
    msg["content"] = "".join(text)
    if thinking:
        msg["reasoning_content"] = "\n".join(thinking)
    if calls:
        msg["tool_calls"] = calls
    return msg, unsigned


def tools_of(body: dict[str, Any]) -> list[dict] | None:
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise BadRequest("tools must be a list")
    out = []
    for i, t in enumerate(tools):
        if not isinstance(t, dict) or "input_schema" not in t:
            kind = t.get("type") if isinstance(t, dict) else type(t).__name__
            raise BadRequest(f"tools[{i}]: only custom tools with an input_schema are "
                             f"supported (got {kind!r}): the agent runs its own tools")
        out.append(function_tool(t.get("name"), t.get("description"), t["input_schema"],
                                 f"tools[{i}]"))
    return out or None


async def handle(gw: Any, episode: Any, body: dict, request: web.Request) -> web.StreamResponse:
    messages, unsigned = messages_of(body)
    if unsigned:
        episode.overrides["unsigned_thinking"] = episode.overrides.get(
            "unsigned_thinking", 0) + unsigned
    done = await episode.complete(messages, tools_of(body), body)
    mid = "msg_" + secrets.token_hex(12)
    if body.get("stream"):
        return await stream(request, done, mid, body["model"])
    return web.json_response({
        "id": mid, "type": "message", "role": "assistant", "model": body["model"],
        "content": blocks(done), "stop_reason": STOP_REASONS[done.finish_reason],
        "stop_sequence": None, "usage": usage(done)})


async def count_tokens(gw: Any, episode: Any, body: dict,
                       request: web.Request) -> web.Response:
    messages, _ = messages_of(body)
    ids = episode.engine.render(messages, tools_of(body))
    return web.json_response({"input_tokens": len(ids)})


def blocks(done: Completion) -> list[dict[str, Any]]:
    p = done.parsed
    out: list[dict[str, Any]] = []
    if p.reasoning is not None:
        out.append({"type": "thinking", "thinking": p.reasoning, "signature": sign(p.reasoning)})
    if p.content or not p.tool_calls:
        out.append({"type": "text", "text": p.content})
    out += [{"type": "tool_use", "id": c["id"], "name": c["name"],
             "input": json.loads(c["arguments"])} for c in p.tool_calls]
    return out


def usage(done: Completion) -> dict[str, int]:
    return {"input_tokens": done.prompt_tokens, "output_tokens": done.completion_tokens,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


async def stream(request: web.Request, done: Completion, mid: str,
                 model: str) -> web.StreamResponse:
    resp = await sse.open_stream(request)
    start = {"id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
             "stop_reason": None, "stop_sequence": None,
             "usage": {**usage(done), "output_tokens": 0}}
    try:
        await sse.send(resp, {"type": "message_start", "message": start}, "message_start")
        for i, block in enumerate(blocks(done)):
            await _block(resp, i, block)
        await sse.send(resp, {"type": "message_delta",
                              "delta": {"stop_reason": STOP_REASONS[done.finish_reason],
                                        "stop_sequence": None},
                              "usage": {"output_tokens": done.completion_tokens}},
                       "message_delta")
        await sse.send(resp, {"type": "message_stop"}, "message_stop")
    except sse.ClientGone:
        return resp
    return await sse.close(resp)


async def _block(resp: web.StreamResponse, index: int, block: dict[str, Any]) -> None:
    kind = block["type"]
    empty = {"thinking": {"type": "thinking", "thinking": "", "signature": ""},
             "text": {"type": "text", "text": ""},
             "tool_use": {**block, "input": {}}}[kind]
    await sse.send(resp, {"type": "content_block_start", "index": index,
                          "content_block": empty}, "content_block_start")
    if kind == "thinking":
        deltas = [{"type": "thinking_delta", "thinking": block["thinking"]},
                  {"type": "signature_delta", "signature": block["signature"]}]
    elif kind == "text":
        deltas = [{"type": "text_delta", "text": block["text"]}] if block["text"] else []
    else:
        deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
    for delta in deltas:
        await sse.send(resp, {"type": "content_block_delta", "index": index, "delta": delta},
                       "content_block_delta")
    await sse.send(resp, {"type": "content_block_stop", "index": index}, "content_block_stop")
