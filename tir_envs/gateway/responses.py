"""OpenAI Responses (``POST /v1/responses``): what the Agents SDK and Codex use by default.

Input items map onto the neutral conversation: ``message`` items by role (``developer`` and
``instructions`` are system turns), a ``reasoning`` item and the ``message``/``function_call``
items after it are one assistant turn (its reasoning, content and calls), a
``function_call_output`` is a tool message.  Clients replay the whole history (``store``
false, Codex and the Agents SDK's default) or name ``previous_response_id``: the gateway keeps
each response's conversation on its episode, so both render the same ids.  The reply's output
items are ``reasoning`` (its text as ``reasoning_text`` content and summary), ``message``
(``output_text``) and ``function_call``; streamed, every item gets ``output_item.added`` /
``.done`` with its deltas between, inside ``response.created`` … ``response.completed``.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from aiohttp import web

from tir_envs.gateway import sse
from tir_envs.gateway.handles import opened, sealed
from tir_envs.gateway.conversation import BadRequest, Message, arguments_object, \
    function_tool, text_of
from tir_envs.gateway.episode import Completion

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
#: responses kept per episode for previous_response_id (older ones are dropped)
KEEP_RESPONSES = 8


def messages_of(body: dict[str, Any], history: dict[str, list[Message]]) -> list[Message]:
    out: list[Message] = []
    prev = body.get("previous_response_id")
    if prev:
        if prev not in history:
            raise BadRequest(f"previous_response_id {prev!r} is not a response of this "
                             "episode (or is too old): replay the input instead", 404,
                             "response_not_found")
        out = [dict(m) for m in history[prev]]
    if body.get("instructions") and not prev:
        out.append({"role": "system", "content": text_of(body["instructions"], "instructions")})
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list):
        raise BadRequest("input must be a string or a list of items")
    return _fold(items, out)


def _fold(items: list, out: list[Message]) -> list[Message]:
    turn: Message | None = None  # the assistant turn being assembled

    def flush() -> None:
        nonlocal turn
        if turn is not None:
            out.append(turn)
            turn = None
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise BadRequest(f"{where}: an item must be an object")
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "reasoning":
            flush()
            turn = {"role": "assistant", "content": "", "reasoning_content": _reasoning(item)}
        elif kind == "message" and item.get("role") == "assistant":
            text = text_of(item.get("content"), where)
            if turn is None or turn["content"] or turn.get("tool_calls"):
                flush()
                turn = {"role": "assistant", "content": ""}
            turn["content"] = text
        elif kind == "function_call":
            if turn is None:
                turn = {"role": "assistant", "content": ""}
            turn.setdefault("tool_calls", []).append({
                "id": item.get("call_id") or "", "type": "function",
                "function": {"name": item.get("name") or "",
                             "arguments": arguments_object(item.get("arguments"), where)}})
        elif kind == "function_call_output":
            flush()
            out.append({"role": "tool", "tool_call_id": item.get("call_id") or "",
                        "content": text_of(item.get("output"), where)})
        elif kind == "message" and item.get("role") in ROLES:
            flush()
            out.append({"role": ROLES[item["role"]],
                        "content": text_of(item.get("content"), where)})
        else:
            raise BadRequest(f"{where}: an item of type {kind!r} is not supported (message, "
                             "reasoning, function_call, function_call_output are)")
    flush()
    return out


def _reasoning(item: dict) -> str:
    """The reasoning text of a replayed item: its content, its summary, or the text our own
    ``encrypted_content`` handle carries (Codex replays only that)."""
    parts = item.get("content") or item.get("summary") or []
    text = "".join(p.get("text") or "" for p in parts if isinstance(p, dict))
    return text or opened(item.get("encrypted_content")) or ""


def tools_of(body: dict[str, Any], hosted: list[str]) -> list[dict] | None:
    """Function tools (a ``namespace`` tool's functions flattened); hosted tools
    (``web_search`` ...) run on a vendor's servers, so they are left out and named in
    ``hosted``."""
    out = []
    for i, t in enumerate(body.get("tools") or []):
        if not isinstance(t, dict):
            raise BadRequest(f"tools[{i}]: a tool must be an object")
        if t.get("type") == "function":
            out.append(function_tool(t.get("name"), t.get("description"),
                                     t.get("parameters"), f"tools[{i}]"))
        elif isinstance(t.get("tools"), list):
            out += tools_of({"tools": t["tools"]}, hosted) or []
        else:
            hosted.append(str(t.get("type")))
    return out or None


async def handle(gw: Any, episode: Any, body: dict, request: web.Request) -> web.StreamResponse:
    history = episode.responses
    messages = messages_of(body, history)
    hosted: list[str] = []
    tools = tools_of(body, hosted)
    for kind in hosted:
        episode.overrides[f"hosted_tool:{kind}"] = episode.overrides.get(
            f"hosted_tool:{kind}", 0) + 1
    done = await episode.complete(messages, tools, body)
    rid = "resp_" + secrets.token_hex(12)
    history[rid] = episode.conversation
    while len(history) > KEEP_RESPONSES:
        history.pop(next(iter(history)))
    response = envelope(rid, body, items(done), done)
    if body.get("stream"):
        return await stream(request, response)
    return web.json_response(response)


def items(done: Completion) -> list[dict[str, Any]]:
    p = done.parsed
    out: list[dict[str, Any]] = []
    if p.reasoning is not None:
        out.append({"type": "reasoning", "id": "rs_" + secrets.token_hex(8),
                    "summary": [{"type": "summary_text", "text": p.reasoning}],
                    "content": [{"type": "reasoning_text", "text": p.reasoning}],
                    "encrypted_content": sealed(p.reasoning)})
    if p.content or not p.tool_calls:
        out.append({"type": "message", "id": "msg_" + secrets.token_hex(8),
                    "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": p.content,
                                 "annotations": [], "logprobs": []}]})
    out += [{"type": "function_call", "id": "fc_" + secrets.token_hex(8), "call_id": c["id"],
             "name": c["name"], "arguments": c["arguments"], "status": "completed"}
            for c in p.tool_calls]
    return out


def envelope(rid: str, body: dict, output: list[dict], done: Completion | None,
             status: str = "completed") -> dict[str, Any]:
    use = None if done is None else {
        "input_tokens": done.prompt_tokens, "output_tokens": done.completion_tokens,
        "total_tokens": done.prompt_tokens + done.completion_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0}}
    incomplete = {"reason": "max_output_tokens"} if done is not None and \
        done.finish_reason == "length" else None
    return {"id": rid, "object": "response", "created_at": int(time.time()),
            "status": "incomplete" if incomplete else status, "model": body["model"],
            "output": output, "usage": use, "error": None, "incomplete_details": incomplete,
            "instructions": body.get("instructions"), "metadata": {},
            "parallel_tool_calls": True, "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [], "temperature": None, "top_p": None,
            "previous_response_id": body.get("previous_response_id"),
            "text": {"format": {"type": "text"}}, "truncation": "disabled"}


async def stream(request: web.Request, response: dict[str, Any]) -> web.StreamResponse:
    resp = await sse.open_stream(request)
    seq = iter(range(1 << 30))

    async def emit(kind: str, **data: Any) -> None:
        await sse.send(resp, {"type": kind, "sequence_number": next(seq), **data}, kind)
    start = {**response, "status": "in_progress", "output": [], "usage": None}
    try:
        await emit("response.created", response=start)
        await emit("response.in_progress", response=start)
        for i, item in enumerate(response["output"]):
            await _item(emit, i, item)
        await emit("response.completed", response=response)
    except sse.ClientGone:
        return resp
    return await sse.close(resp)


async def _item(emit: Any, index: int, item: dict[str, Any]) -> None:
    kind, iid = item["type"], item["id"]
    if kind == "message":
        await emit("response.output_item.added", output_index=index,
                   item={**item, "status": "in_progress", "content": []})
        part = item["content"][0]
        await emit("response.content_part.added", item_id=iid, output_index=index,
                   content_index=0, part={**part, "text": ""})
        await emit("response.output_text.delta", item_id=iid, output_index=index,
                   content_index=0, delta=part["text"], logprobs=[])
        await emit("response.output_text.done", item_id=iid, output_index=index,
                   content_index=0, text=part["text"], logprobs=[])
        await emit("response.content_part.done", item_id=iid, output_index=index,
                   content_index=0, part=part)
    elif kind == "function_call":
        await emit("response.output_item.added", output_index=index,
                   item={**item, "status": "in_progress", "arguments": ""})
        await emit("response.function_call_arguments.delta", item_id=iid, output_index=index,
                   delta=item["arguments"])
        await emit("response.function_call_arguments.done", item_id=iid, output_index=index,
                   arguments=item["arguments"], name=item["name"])
    else:
        await emit("response.output_item.added", output_index=index,
                   item={**item, "summary": [], "content": []})
        text = item["summary"][0]["text"]
        await emit("response.reasoning_summary_part.added", item_id=iid, output_index=index,
                   summary_index=0, part={"type": "summary_text", "text": ""})
        await emit("response.reasoning_summary_text.delta", item_id=iid, output_index=index,
                   summary_index=0, delta=text)
        await emit("response.reasoning_summary_text.done", item_id=iid, output_index=index,
                   summary_index=0, text=text)
        await emit("response.reasoning_summary_part.done", item_id=iid, output_index=index,
                   summary_index=0, part=item["summary"][0])
    await emit("response.output_item.done", output_index=index, item=item)
