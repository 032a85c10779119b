"""``tir-envs chat-check TOKENIZER``: what chat mode will do with a tokenizer, before any GPU
hour is spent.

    tir-envs chat-check Qwen/Qwen3-8B --thinking off
    tir-envs chat-check ./my-model            # a folder with its tokenizer files
    tir-envs chat-check family:mistral        # an offline vocabulary (tir_envs.chat.vocab)

Says which renderer applies (or why none does), whether the template is prefix-stable for an
episode's shape, the stop ids, and the env tokens around a tool message (decoded and as ids).
Exit status 0 when chat mode can run, 1 when ``make()`` would refuse.
"""

from __future__ import annotations

import argparse
from typing import Any

from tir_envs.chat.registry import FAMILIES, THINKING, resolve_renderer
from tir_envs.chat.template import TemplateRenderer, probe_template
from tir_envs.chat.vocab import family_tokenizer, is_stand_in
from tir_envs.codec import Codec
from tir_envs.tokenizer import load_tokenizer

SCHEMA = {"type": "function", "function": {
    "name": "python", "description": "Run Python code and return what it prints.",
    "parameters": {"type": "object", "required": ["code"],
                   "properties": {"code": {"type": "string"}}}}}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("chat-check", help="check a tokenizer's chat mode",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("tokenizer", metavar="TOKENIZER",
                   help="a tokenizer folder, a hub name, or family:NAME (offline vocabularies)")
    p.add_argument("--thinking", choices=THINKING, help="thinking mode (qwen3, glm-4.5)")
    p.add_argument("--renderer", choices=sorted(FAMILIES), help="force a family's renderer")
    p.add_argument("--role", default="tool", help="the observation role to bridge (tool)")
    p.set_defaults(func=run)
    return p


def open_tokenizer(spec: str) -> Any:
    if spec.startswith("family:"):
        return family_tokenizer(spec.split(":", 1)[1])
    return load_tokenizer(spec)


def run(args: argparse.Namespace) -> int:
    tok = open_tokenizer(args.tokenizer)
    codec = Codec(tok)
    print(f"tokenizer: {getattr(tok, 'name_or_path', '') or args.tokenizer} "
          f"({len(tok)} tokens){' [STAND-IN vocabulary]' if is_stand_in(tok) else ''}")
    try:
        renderer = resolve_renderer(tok, codec, args.renderer, args.thinking, args.role)
    except (ValueError, ImportError) as exc:
        print(f"renderer: none -- make() refuses chat mode: {exc}")
        return 1
    print(f"renderer: {renderer.describe()}")
    if isinstance(renderer, TemplateRenderer):
        print(f"prefix-stable: yes (probe: {args.role!r} turns extend the text, same glue "
              "every turn)" if not isinstance(probe_template(tok, args.role), str) else "no")
    else:
        print("prefix-stable: the family's bridge keeps sampled ids verbatim (no re-render)")
    stops = renderer.stop_token_ids()
    print("stop ids: " + ", ".join(f"{i} {codec.decode([i])!r}" for i in stops))
    messages = [{"role": "system", "content": "You are helpful."},
                {"role": "user", "content": "What is 6 * 7?"}]
    tools = [SCHEMA] if renderer.renders_tools else None
    prompt = renderer.prompt_ids(messages, tools)
    print(f"prompt: {len(prompt)} tokens, ends {codec.decode(prompt[-12:])!r}")
    if renderer.renders_tools:
        said = renderer.render_calls([("python", {"code": "print(6 * 7)"})])
        completion = tok.encode(said, add_special_tokens=False) if renderer.family != \
            "mistral" else _mistral_ids(renderer, said)
    else:
        completion = codec.encode("Let me compute.") + list(stops[:1])
    message = {"role": args.role, "content": "RESULT", "name": "python"}
    if renderer.renders_tools:
        calls = renderer.parse_calls(codec.decode(completion))
        if calls and getattr(calls[0], "call_id", None):
            message["tool_call_id"] = calls[0].call_id
    env = renderer.bridge_ids(prompt, completion, [message])
    print(f"sampled turn: {codec.decode(completion)!r}")
    print(f"env tokens after it (loss mask 0): {codec.decode(env)!r}")
    print(f"  ids: {env}")
    return 0


def _mistral_ids(renderer: Any, text: str) -> list[int]:
    inner = renderer.instruct
    body = text.removeprefix("[TOOL_CALLS]").removesuffix("</s>")
    return [inner.TOOL_CALLS, *inner.tokenizer.encode(body, bos=False, eos=False),
            inner.tokenizer.eos_id]
