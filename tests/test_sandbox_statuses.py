"""Issue 21, item 1: no status the policy can forge.

A status other than ok / error / timeout / killed comes only from what the host itself
observed, never from a frame.  The property, exhaustively over a grid: a cell that writes any
frame it likes (setup outcomes, hellos, results with a guessed or the real nonce, unknown
kinds, truncated frames, huge headers, garbage) to every descriptor it can reach, at any point
of a first, a later or a stateless call, then ends in any way the host can report (ok, error,
killed, timeout, or leaves a process that writes after the cell), never yields
``infra_error``, and neither does the next call.  Then the same attack through the public
API: a forging cell in each math protocol, stateful and stateless, scores the wrong answer as
wrong and never flags the trajectory ``infra_failed``.
"""

from __future__ import annotations

import json

import pytest

import tir_envs
from tests.sandbox_helpers import (backend_or_skip, call, close_session, FIND_NONCE,
                                   NAMESPACE_MODES, open_session, session_of)
from tir_envs.task import Task
from tir_envs.tools.base import Status
from tir_envs.tools.python import Limits, PythonTool

# Finds the nonce of the running request on the stack (the sandbox's own frames hold it),
# then writes ``frame`` to every descriptor the cell can reach.
PRELUDE = FIND_NONCE + """
def framed(body):
    return len(body).to_bytes(4, 'big') + body
def spray(data):
    for fd in range(256):
        try:
            os.write(fd, data)
        except OSError:
            pass
"""

FRAMES = {
    "setup_error": "framed(json.dumps({'op': 'setup_error', 'error': 'x'}).encode())",
    "setup_ok": "framed(json.dumps({'op': 'setup_ok'}).encode())",
    "hello": "framed(json.dumps({'op': 'ready', 'pid': 1}).encode())",
    "old_infra_json": "framed(json.dumps({'op': 'result', 'status': 'infra_error'}).encode())",
    "guessed_nonce": "proto.encode_result(0, {'status': 'ok', 'stdout': 'x'})",
    "real_nonce_every_kind": "b''.join(proto.encode_result(nonce, {'status': k}) "
                             "for k in proto.STATUSES)",
    "unknown_kind": "(lambda b: b[:13] + bytes([200]) + b[14:])"
                    "(proto.encode_result(nonce, {'status': 'ok'}))",
    "truncated": "proto.encode_result(nonce, {'status': 'ok', 'stdout': 'y' * 50})[:30]",
    "huge_header": "b'\\xff\\xff\\xff\\xff' + b'z' * 64",
    "garbage": "bytes(range(256)) * 4",
}

ENDINGS = {
    "ok": "print('done')",
    "error": "raise ValueError('after the forgery')",
    "killed": "import signal; os.kill(os.getpid(), signal.SIGKILL)",
    "exit": "os._exit(7)",
    "timeout": "while True:\n    pass",
    # a process that outlives the cell and writes once more, while the next call runs
    "later": "import time\nif os.fork() == 0:\n    time.sleep(0.3)\n    spray(data)\n"
             "    os._exit(0)\nprint('left a writer behind')",
}

ALLOWED = {Status.OK, Status.ERROR, Status.TIMEOUT, Status.KILLED}


@pytest.fixture(scope="module", params=(*NAMESPACE_MODES, "rlimits"))
def backend(request):
    return backend_or_skip(request.param)


def forging_cell(frame: str, ending: str) -> str:
    return f"{PRELUDE}\ndata = {FRAMES[frame]}\nspray(data)\n{ENDINGS[ending]}\n"


def run_at(backend, position: str, cell: str):
    """The forging cell at ``position`` of a session, then one more call."""
    limits = Limits(timeout_s=0.5)
    if position == "stateless":
        tool = PythonTool(backend=backend, limits=limits, stateful=False)
        return [call(tool, cell), call(tool, "import time; time.sleep(0.4); print('next')")]
    tool = PythonTool(backend=backend, limits=limits)
    with session_of(tool) as s:
        before = [call(tool, "x = 1", s)] if position == "later" else []
        return before + [call(tool, cell, s),
                         call(tool, "import time; time.sleep(0.4); print('next')", s)]


@pytest.mark.parametrize("position", ["first", "later", "stateless"])
@pytest.mark.parametrize("ending", sorted(ENDINGS))
@pytest.mark.parametrize("frame", sorted(FRAMES))
def test_no_frame_yields_infra_error(backend, frame, ending, position):
    results = run_at(backend, position, forging_cell(frame, ending))
    for r in results:
        assert r.status in ALLOWED, (r.status, r.text)
        assert "not your fault" not in r.text


# ------------------------------------------------------------------ through the public API
FORGE_CELL = forging_cell("setup_error", "ok")
TASK = Task("t/42", "What is $6 \\times 7$?", answer="42")


def actions(protocol: str) -> list[str]:
    """A forging code cell, then the wrong answer 41, in ``protocol``'s own format."""
    if protocol == "rite":
        tool_call = {"name": "python", "arguments": {"code": FORGE_CELL}}
        answer = {"name": "answer", "arguments": {"answer": "\\boxed{41}"}}
        return [f"<tool_call>\n{json.dumps(tool_call)}\n</tool_call>",
                f"<tool_call>\n{json.dumps(answer)}\n</tool_call>"]
    if protocol == "zerotir":
        return [" Check.\n```python", f"\n{FORGE_CELL}\n```",
                " So 41.</think> <answer>\\boxed{41}</answer>"]
    return [f"```python\n{FORGE_CELL}\n```\n```output", "So $\\boxed{41}$."]


@pytest.mark.parametrize("stateful", [True, False])
# RITE: eq. 8's -1 for the wrong answer, +0 format (calls without a thought: a minor issue)
@pytest.mark.parametrize("protocol,wrong", [("torl", -1.0), ("zerotir", 0.0), ("rite", -1.0)])
def test_forged_setup_failure_through_the_env(qwen_tok, protocol, wrong, stateful):
    env = tir_envs.make("tir/MathCode-v0", protocol=protocol, tasks=[TASK], tokenizer=qwen_tok,
                        stateful=stateful)
    try:
        env.reset(options={"index": 0})
        for a in actions(protocol):
            _, reward, term, trunc, info = env.step(
                qwen_tok.encode(a, add_special_tokens=False))
            if term or trunc:
                break
        traj = info["trajectory"]
        statuses = [r["status"] for t in traj.turns for r in t.tool_results]
        assert statuses and "infra_error" not in statuses, statuses
        assert traj.infra_failed is False
        assert reward == wrong
    finally:
        env.close()
