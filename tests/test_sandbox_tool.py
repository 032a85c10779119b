"""``PythonTool`` on the local backend: what the model reads, statuses, sessions, and use from
many event loops and threads at once (real sandboxed interpreters throughout)."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from tests.sandbox_helpers import (call, close_session, marker, open_session, session_of, wait_gone,
                                   wait_present)
from tir_envs.env import TIREnv
from tir_envs.tools.base import ToolResult, Status
from tir_envs.tools.python import (Limits, LocalBackend, PythonTool, SandboxBackend,
                                   SandboxUnavailable)

AUTO = LocalBackend(spares=4)


@pytest.fixture(scope="module")
def tool():
    return PythonTool(backend=AUTO, timeout_s=5)


@pytest.fixture
def session(tool):
    s = open_session(tool)
    yield s
    close_session(tool, s)


def test_state_persists_and_final_expression_is_shown(tool, session):
    assert call(tool, "x = 20\ny = x + 1", session).text == ""
    assert call(tool, "x * 2 + y", session).text == "61"
    assert call(tool, "print('hi')\nx + 1", session).text == "hi\n21"  # as a notebook: both
    assert call(tool, "print('only')\nNone", session).text == "only"
    r = call(tool, "import sympy as sp\nsp.factor(sp.Symbol('a')**2 - 1)", session)
    assert r.status == Status.OK and r.text == "(a - 1)*(a + 1)"
    assert r.metadata["has_value"] is True


def test_result_metadata(tool, session):
    r = call(tool, "import sys\nprint('out')\nprint('warn', file=sys.stderr)\n1/0", session)
    assert isinstance(r, ToolResult) and r.status == Status.ERROR
    meta = r.metadata
    assert meta["error_last_line"] == "ZeroDivisionError: division by zero"
    assert meta["error_type"] == "ZeroDivisionError" and meta["exit"] == "error"
    assert meta["truncated"] is False and meta["backend"] == "local"
    assert meta["isolation"] in ("bwrap", "unshare", "rlimits")
    assert r.latency_s > 0
    assert r.text.startswith("out\nwarn\nTraceback (most recent call last):")  # stdout, stderr,
    assert r.text.endswith("ZeroDivisionError: division by zero")            # then the error
    # issue 11: the output is the result text; metadata never holds a second copy of it
    assert not {"stdout", "stderr", "value", "error"} & set(meta)


def test_error_styles(session):
    code = "def f(n):\n    return 10 // n\nf(0)"
    full = PythonTool(backend=AUTO, error_style="full")
    last = PythonTool(backend=AUTO, error_style="last_line")
    r_full, r_last = call(full, code), call(last, code)
    assert r_last.text == "ZeroDivisionError: integer division or modulo by zero"
    lines = r_full.text.splitlines()
    assert lines[0] == "Traceback (most recent call last):" and lines[-1] == r_last.text
    assert 'File "<cell-1>", line 3, in <module>' in r_full.text
    assert 'File "<cell-1>", line 2, in f' in r_full.text
    assert "interpreter.py" not in r_full.text and "zygote" not in r_full.text


def test_traceback_keeps_library_frames_called_by_the_code(tool):
    r = call(tool, "from fractions import Fraction\nFraction(1, 0)")
    assert r.status == Status.ERROR
    assert "fractions.py" in r.text and "<cell-1>" in r.text and "sandbox" not in r.text


def test_syntax_error(tool):
    r = call(tool, "x = (1,\nprint(x)")
    assert r.status == Status.ERROR
    assert r.text.splitlines()[-1].startswith("SyntaxError")
    assert "Traceback" not in r.text  # nothing ran: only the compiler's message


@pytest.mark.parametrize("args", [{}, {"code": None}, {"code": 3}, {"cmd": "print(1)"},
                                  "print(1)", None])
def test_bad_arguments_are_an_error_result(tool, session, args):
    for s in (session, None):
        r = asyncio.run(tool.call(args, s))
        assert r.status == Status.ERROR and "'code'" in r.text
        assert r.metadata["error_last_line"] == r.text


def test_output_is_capped_and_the_cut_marked(tool):
    small = PythonTool(backend=AUTO, max_output_chars=100)
    r = call(small, "print('A' * 50 + 'B' * 5000 + 'C' * 50)")
    assert r.status == Status.OK and r.metadata["truncated"]
    assert r.text.startswith("A" * 50) and r.text.endswith("C" * 20)
    assert "characters truncated" in r.text and len(r.text) < 200
    big_value = call(small, "'v' * 10_000")
    assert big_value.metadata["truncated"] and len(big_value.text) < 200


def test_stateless_mode_starts_fresh_every_call():
    t = PythonTool(backend=AUTO, stateful=False, error_style="last_line")
    with session_of(t) as s:
        assert call(t, "z = 1\nz", s).text == "1"
        assert call(t, "z", s).text == "NameError: name 'z' is not defined"
        assert call(t, "z").text == "NameError: name 'z' is not defined"  # no session at all


def test_scientific_stack_is_preloaded(tool):
    r = call(tool, "import sys\nsorted(m for m in ('numpy', 'sympy', 'fractions', 'itertools', "
                   "'math', 'mpmath') if m in sys.modules)")
    assert r.text == "['fractions', 'itertools', 'math', 'mpmath', 'numpy', 'sympy']"


def test_each_session_has_its_own_random_state(tool):
    code = "import random, numpy as np\n(random.random(), float(np.random.rand()))"
    a, b = call(tool, code), call(tool, code)
    assert a.status == b.status == Status.OK and a.text != b.text
    ra, rb = eval(a.text), eval(b.text)  # noqa: S307 - tuples of floats we printed
    assert ra[0] != rb[0] and ra[1] != rb[1]


def test_many_concurrent_sessions_stay_separate(tool):
    async def one(i: int) -> str:
        s = await tool.open_session()
        try:
            await tool.call({"code": f"mine = {i}"}, s)
            await asyncio.sleep(0.01)
            return (await tool.call({"code": "mine * 1000"}, s)).text
        finally:
            await tool.close_session(s)

    async def main():
        return await asyncio.gather(*(one(i) for i in range(32)))

    assert asyncio.run(main()) == [str(i * 1000) for i in range(32)]


def test_cancelled_call_ends_the_running_cell(tool, session):
    mark = marker()

    async def main():
        task = asyncio.ensure_future(tool.call(
            {"code": f"import subprocess\nsubprocess.run(['sleep', '3000.{mark}'])"}, session))
        assert await asyncio.to_thread(wait_present, mark)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert wait_gone(mark) == []  # nobody will read the cell's result: it was stopped


class TagEnv(TIREnv):
    env_id = "test/SandboxTags"


def make_env(qwen_tok, tool):
    return TagEnv(tokenizer=qwen_tok, tasks=[{"question": "compute"}], tool_format="tags",
                  tools=[tool], max_turns=4)


def run_episode(env, values) -> list[str]:
    env.reset(options={"index": 0})
    seen = []
    for v in values:
        obs, *_ = env.step(f"<python>acc = acc + {v} if 'acc' in dir() else {v}\nprint(acc)"
                           "</python>")
        seen.append(env.codec.decode(obs["tokens"].tolist()))
    env.step("The answer is done.")
    return seen


def test_env_step_from_many_threads_shares_one_pool(qwen_tok, tool):
    """Sync ``step`` runs on a private loop per env; eight envs in eight threads at once."""
    results: dict[int, list[str]] = {}

    def worker(i: int) -> None:
        env = make_env(qwen_tok, tool)
        results[i] = run_episode(env, [i, 100])
        env.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    for i in range(8):
        assert str(i) in results[i][0] and str(i + 100) in results[i][1]


def test_env_astep_on_the_callers_loop(qwen_tok, tool):
    env = make_env(qwen_tok, tool)

    async def episode():
        await env.areset(options={"index": 0})
        obs, *_ = await env.astep("<python>q = 6 * 7\nprint(q)</python>")
        first = env.codec.decode(obs["tokens"].tolist())
        obs, *_ = await env.astep("<python>q + 1</python>")
        second = env.codec.decode(obs["tokens"].tolist())
        _, _, terminated, _, info = await env.astep("Done.")
        return first, second, terminated, info["trajectory"]

    first, second, terminated, traj = asyncio.run(episode())
    assert "42" in first and "43" in second and terminated
    assert [t.status for t in traj.turns[:2]] == ["ok", "ok"]
    assert not env._sessions  # the episode's session was closed


def test_timeout_is_a_turn_status_not_an_exception(qwen_tok):
    t = PythonTool(backend=AUTO, timeout_s=1)
    env = make_env(qwen_tok, t)
    env.reset(options={"index": 0})
    obs, _, _, _, info = env.step("<python>while True:\n    pass</python>")
    assert info["turn"].status == "timeout"
    assert "TimeoutError" in env.codec.decode(obs["tokens"].tolist())
    env.close()


class DownBackend(SandboxBackend):
    """A backend whose sandbox never starts (what a dead cluster looks like)."""

    name = "down"

    async def open(self, limits):
        raise SandboxUnavailable("no workers")

    async def run(self, handle, code, limits):  # pragma: no cover - never reached
        raise AssertionError

    async def close(self, handle):
        return None


def test_unavailable_sandbox_is_infra_error_not_exception():
    t = PythonTool(backend=DownBackend())
    s = open_session(t)
    for session in (s, None):
        r = call(t, "print(1)", session)
        assert r.status == Status.INFRA_ERROR and "not your fault" in r.text
    close_session(t, s)


def test_constructor_rejects_bad_settings():
    with pytest.raises(ValueError, match="error_style"):
        PythonTool(error_style="short")
    with pytest.raises(ValueError, match="backend"):
        PythonTool(backend="docker")
    with pytest.raises(ValueError, match="timeout_s"):
        PythonTool(timeout_s=0)
    with pytest.raises(ValueError, match="memory_mb"):
        PythonTool(memory_mb=-5)
    with pytest.raises(ValueError, match="isolation"):
        PythonTool(isolation="docker")
    with pytest.raises(TypeError, match="stateful"):
        PythonTool(stateful="yes")
    assert PythonTool().limits == Limits()
    assert PythonTool(limits=Limits(timeout_s=3), memory_mb=64).limits.timeout_s == 3


def test_numpy_arrays_print_like_python(tool):
    r = call(tool, "import numpy as np\nnp.arange(3)")
    assert r.text == repr(np.arange(3))
