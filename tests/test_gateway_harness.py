"""CLI harnesses through the gateway, each against a scripted Qwen3 policy (thinking on) that
calls the harness's own shell tool once, then answers: Claude Code (npm
``@anthropic-ai/claude-code``) in ``-p`` mode pointed at it with ``ANTHROPIC_BASE_URL``, and
Codex (npm ``@openai/codex``) in ``exec`` mode with the gateway as its Responses provider
(``CODEX_HOME/config.toml``).

Claude Code runs with its nonessential traffic on: its side calls (a title) must come out as
side conversations, not breaks.  It always streams ``/v1/messages?beta=true`` with its ~70 kB of tool schemas, a
system entry and moving ``cache_control`` markers; the test checks it finishes with the
policy's answer, that the tool really ran (its output reached the policy), and that the
ledger holds at every call with no history rewrite.  Codex streams ``/v1/responses`` with ``store``
false, replays its history whole (the reasoning as ``encrypted_content`` only) and declares a
hosted ``web_search`` the gateway leaves out.  ``make test`` installs both into ``.venv/npm``
when npm is present; without them the tests say so and skip.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.gateway_helpers import ANSWER, ToolLoopPolicy, check_ledger
from tir_envs.chat import resolve_renderer
from tir_envs.codec import Codec
from tir_envs.gateway import Gateway
from tir_envs.tokenizer import family_tokenizer


def harness(binary: str, package: str) -> str:
    local = Path(sys.prefix) / "npm" / "node_modules" / ".bin" / binary
    found = (str(local) if local.exists() else None) or shutil.which(binary)
    if not found:
        pytest.skip(f"{package} is not installed: make test installs it with npm into "
                    f".venv/npm (npm install --prefix .venv/npm {package})")
    return found


def qwen3_policy(tool: str, arguments):
    tok = family_tokenizer("qwen3")
    renderer = resolve_renderer(tok, Codec(tok), "qwen3", "on")
    return tok, renderer, ToolLoopPolicy(tok, renderer, calls=1, tool=tool, arguments=arguments)


async def run(argv: list[str], env: dict, cwd: Path) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(*argv, env={**os.environ, **env}, cwd=cwd,
                                                stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 300)
    return proc.returncode, out.decode(), err.decode()


def test_claude_code_print_mode_through_the_gateway(tmp_path):
    claude = harness("claude", "@anthropic-ai/claude-code")
    tok, renderer, policy = qwen3_policy("Bash", lambda k: {
        "command": f"echo tool-said-{k}", "description": "Echo a marker"})

    async def main():
        async with Gateway(policy, tokenizer=tok, renderer=renderer) as gw:
            _, key = gw.open_episode()
            env = {"ANTHROPIC_BASE_URL": gw.url, "ANTHROPIC_API_KEY": key,
                   "ANTHROPIC_MODEL": "tir-policy", "ANTHROPIC_SMALL_FAST_MODEL": "tir-policy",
                   "DISABLE_AUTOUPDATER": "1",
                   "HOME": str(tmp_path)}
            rc, out, err = await run([claude, "-p", "Run echo with the Bash tool, then answer.",
                                      "--allowedTools", "Bash", "--output-format", "json"],
                                     env, tmp_path)
            assert rc == 0, err[-2000:]
            return json.loads(out), await gw.finish(key)
    report, result = asyncio.run(main())
    assert report["result"] == ANSWER and report["num_turns"] == 2
    # its side calls (a title, with nonessential traffic on) are conversations of their own:
    # side segments, token-exact, never a break nor the episode's sample
    side = result.side_trajectories
    assert result.breaks == 0 and len(result.trajectories) == 1
    assert all(f.cause == "side_conversation" for f in result.forks)
    assert result.calls == 2 + sum(len(t.turns) for t in side)
    check_ledger(SimpleNamespace(trajectories=result.trajectories + side), policy.seen)
    main = result.trajectories[0]
    assert len(main.turns) == 2 and len(main.prompt_ids) > 10_000  # its prompt and schemas
    # the Bash tool ran for real: its output is what the gateway inserted after the call
    start, end = main.turns[0].observation_span
    assert "tool-said-0" in gw_text(tok, main.token_ids[start:end])
    assert result.client_tools["results"] == 1  # the result Claude Code sent back


def test_codex_exec_through_the_gateway(tmp_path):
    codex = harness("codex", "@openai/codex")
    tok, renderer, policy = qwen3_policy("exec_command",
                                         lambda k: {"cmd": f"echo tool-said-{k}"})

    async def main():
        async with Gateway(policy, tokenizer=tok, renderer=renderer) as gw:
            base_url, key = gw.open_episode()
            (tmp_path / "config.toml").write_text(
                'model = "tir-policy"\nmodel_provider = "tir"\n[model_providers.tir]\n'
                f'name = "tir-envs gateway"\nbase_url = "{base_url}"\n'
                'env_key = "TIR_GATEWAY_KEY"\nwire_api = "responses"\n')
            env = {"CODEX_HOME": str(tmp_path), "HOME": str(tmp_path), "TIR_GATEWAY_KEY": key}
            rc, out, err = await run([codex, "exec", "--skip-git-repo-check",
                                      "--dangerously-bypass-approvals-and-sandbox",
                                      "Run echo, then answer."], env, tmp_path)
            assert rc == 0, err[-2000:]
            return out, await gw.finish(key)
    out, result = asyncio.run(main())
    assert out.strip().endswith(ANSWER)
    assert result.calls == 2 and result.breaks == 0
    assert result.overrides.get("hosted_tool:web_search") == 2
    check_ledger(result, policy.seen)
    assert "tool-said-0" in gw_text(tok, policy.seen[1][len(policy.seen[0]):])


def gw_text(tok, ids) -> str:
    return tok.decode(list(ids), skip_special_tokens=False)
