"""A CLI harness through the gateway: Claude Code (npm ``@anthropic-ai/claude-code``) in ``-p``
mode, pointed at it with ``ANTHROPIC_BASE_URL``, against a scripted Qwen3 policy (thinking
on) that calls Claude Code's own ``Bash`` tool once, then answers.

Claude Code always streams ``/v1/messages?beta=true`` with its ~70 kB of tool schemas, a
system entry and moving ``cache_control`` markers; the test checks it finishes with the
policy's answer, that the tool really ran (its output reached the policy), and that the
ledger holds at every call with no fork.  ``make test`` installs Claude Code into
``.venv/npm`` when npm is present; without it the test says so and skips.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.gateway_helpers import ANSWER, ToolLoopPolicy, check_ledger
from tir_envs.chat import resolve_renderer
from tir_envs.codec import Codec
from tir_envs.gateway import Gateway
from tir_envs.tokenizer import family_tokenizer


def claude_code() -> str:
    local = Path(sys.prefix) / "npm" / "node_modules" / ".bin" / "claude"
    found = os.environ.get("TIR_CLAUDE_CODE") or (str(local) if local.exists() else None) \
        or shutil.which("claude")
    if not found:
        pytest.skip("Claude Code is not installed: make test installs it with npm into "
                    ".venv/npm (npm install --prefix .venv/npm @anthropic-ai/claude-code)")
    return found


def test_claude_code_print_mode_through_the_gateway(tmp_path):
    claude = claude_code()
    tok = family_tokenizer("qwen3")
    renderer = resolve_renderer(tok, Codec(tok), "qwen3", "on")
    policy = ToolLoopPolicy(tok, renderer, calls=1, tool="Bash", arguments=lambda k: {
        "command": f"echo tool-said-{k}", "description": "Echo a marker"})

    async def main():
        async with Gateway(policy, tokenizer=tok, renderer=renderer) as gw:
            _, key = gw.open_episode()
            env = {**os.environ, "ANTHROPIC_BASE_URL": gw.url, "ANTHROPIC_API_KEY": key,
                   "ANTHROPIC_MODEL": "tir-policy", "ANTHROPIC_SMALL_FAST_MODEL": "tir-policy",
                   "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
                   "HOME": str(tmp_path)}
            proc = await asyncio.create_subprocess_exec(
                claude, "-p", "Run echo with the Bash tool, then answer.", "--allowedTools",
                "Bash", "--output-format", "json", env=env, cwd=tmp_path,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await asyncio.wait_for(proc.communicate(), 300)
            assert proc.returncode == 0, err.decode()[-2000:]
            return json.loads(out), await gw.finish(key)
    report, result = asyncio.run(main())
    assert report["result"] == ANSWER and report["num_turns"] == 2
    assert result.calls == 2 and result.breaks == 0
    check_ledger(result, policy.seen)
    # the Bash tool ran for real: its output is in the second prompt, as a tool response
    assert "tool-said-0" in gw_text(tok, policy.seen[1][len(policy.seen[0]):])
    assert len(policy.seen[0]) > 10_000  # Claude Code's system prompt and tool schemas


def gw_text(tok, ids) -> str:
    return tok.decode(list(ids), skip_special_tokens=False)
