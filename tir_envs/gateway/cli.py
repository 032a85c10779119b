"""``tir-envs serve gateway``: the gateway as its own process.

It prints ``serving at URL``, then an admin token (``POST /gateway/episodes`` opens an episode,
``POST /gateway/episodes/finish`` ends one and answers its ledger), and with ``--episodes N``
the keys of N episodes opened at start (for a CLI harness: ``ANTHROPIC_BASE_URL=URL
ANTHROPIC_API_KEY=KEY claude -p ...``).  Every finished episode's trajectories go to ``--out``
(JSONL); episodes still open at Ctrl-C are finished then, and an episode idle for
``--idle-timeout`` is written when it expires (flagged), so nothing sampled is lost.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import sys
from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policy", required=True,
                   help="KIND:TARGET (hf:PATH, vllm:PATH, openai:URL, scripted:FILE)")
    p.add_argument("--policy-model", help="openai:URL policies: the served model name")
    p.add_argument("--tokenizer", help="tokenizer folder, or offline:FAMILY for a bundled "
                                       "vocabulary (chatml, qwen3, mistral, llama-3, ...; "
                                       "default: the model's, or the bundled Qwen2.5)")
    p.add_argument("--renderer", help="model family (qwen3, llama-3, ...; default: detected)")
    p.add_argument("--thinking", choices=("on", "off"), help="families with a switch")
    p.add_argument("--model", default="tir-policy", help="the model name clients send")
    p.add_argument("--alias", action="append", default=[],
                   help="another model name to accept (e.g. the one a CLI harness sends)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--max-tokens", type=int, default=1024)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    p.add_argument("--port", type=int, default=8300)
    p.add_argument("--episodes", type=int, default=0, help="open N episodes at start")
    p.add_argument("--out", help="write finished episodes' trajectories here (JSONL)")
    p.add_argument("--allow-origin", action="append", default=[],
                   help="an Origin (web page) allowed to call the gateway")
    p.add_argument("--side-segments", choices=("skip", "train"), default="skip",
                   help="segments of side conversations (a harness's title call): left out "
                        "of the trainable trajectories (skip) or kept (train)")
    p.add_argument("--max-episodes", type=int, default=65_536,
                   help="open episodes held at most (opening more is refused, HTTP 503)")
    p.add_argument("--idle-timeout", type=float, default=900.0, metavar="SECONDS",
                   help="an episode with no call for this long expires: its ledger is "
                        "written to --out flagged infra_failed (timeout); 0: never")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tir_envs.gateway.server import Gateway
    from tir_envs.rollout.policy import SamplingParams
    from tir_envs.rollout.specs import PolicySpecError, build_policy

    tokenizer: Any = args.tokenizer
    if tokenizer and tokenizer.startswith("offline:"):
        from tir_envs.tokenizer import family_tokenizer
        try:
            tokenizer = family_tokenizer(tokenizer.split(":", 1)[1])
        except ValueError as exc:
            raise SystemExit(f"tir-envs serve gateway: --tokenizer: {exc}") from None
    try:
        policy, tok = build_policy(args.policy, tokenizer=tokenizer,
                                   model=args.policy_model)
    except PolicySpecError as exc:
        raise SystemExit(f"tir-envs serve gateway: {exc}") from None
    token = os.environ.get("TIR_GATEWAY_ADMIN_TOKEN") or secrets.token_urlsafe(32)
    gw = Gateway(policy, tokenizer=tok, renderer=args.renderer, thinking=args.thinking,
                 sampling=SamplingParams(max_tokens=args.max_tokens,
                                         temperature=args.temperature),
                 model=args.model, aliases=tuple(args.alias), host=args.host,
                 port=args.port, allowed_origins=tuple(args.allow_origin),
                 admin_token=token, side_segments=args.side_segments,
                 max_episodes=args.max_episodes, idle_timeout_s=args.idle_timeout or None,
                 keep_expired=False)
    import asyncio  # here: `tir-envs --help` reads add_arguments without starting a loop

    asyncio.run(_serve(gw, args))
    return 0


async def _serve(gw: Any, args: argparse.Namespace) -> None:
    import asyncio

    out = open(args.out, "a", encoding="utf-8") if args.out else None  # noqa: SIM115

    def write(result: Any) -> None:
        if out is not None:
            for traj in result.trajectories:
                out.write(traj.to_json() + "\n")
            out.flush()
        side = f", {len(result.side_trajectories)} side segments" \
            if result.side_trajectories else ""
        print(f"episode {result.key_id}: {result.calls} calls, {result.breaks} breaks{side}, "
              + (f"{result.error}, " if result.error else "") +
              f"reward {result.reward}", flush=True)
    gw.on_finish.append(write)
    await gw.start()
    print(f"serving at {gw.url} (OpenAI: {gw.url}/v1, Anthropic: {gw.url})", flush=True)
    print(f"admin token: {gw.admin_token}", flush=True)
    for _ in range(args.episodes):
        print(json.dumps(dict(zip(("base_url", "api_key"), gw.open_episode()))), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for key in list(gw.episodes):
            await gw.finish(key, error=None)
        await gw.aclose()
        if out is not None:
            out.close()
        print("gateway stopped", file=sys.stderr, flush=True)
