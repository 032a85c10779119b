"""The sandbox's pure pieces, without processes: wire format, output capture, limits, the
launcher's allow-list, result rendering."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tir_envs.tools.base import Status
from tir_envs.tools.python import Execution, Limits, PoolConfig
from tir_envs.tools.python.pool.launcher import (MODES, _bwrap_args, _dedupe, allowed_paths,
                                            launch_spec, sandbox_env)
from tir_envs.tools.python.backends.local import execution_from_reply
from tir_envs.tools.python.sandbox import capture, protocol

REPO = Path(__file__).resolve().parents[1]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=60, deadline=None)
@given(frames=st.lists(json_values, max_size=5), cut=st.integers(min_value=1, max_value=7))
def test_frames_survive_any_chunking(frames, cut):
    data = b"".join(protocol.encode(f) for f in frames)
    dec, out = protocol.Decoder(), []
    for i in range(0, len(data), cut):
        out += dec.feed(data[i:i + cut])
    assert [json.loads(b) for b in out] == frames and dec.pending == 0


def test_decoder_refuses_oversized_frames_before_buffering_them():
    with pytest.raises(protocol.ProtocolError, match="exceeds"):
        protocol.Decoder(max_frame=10).feed(protocol.HEADER.pack(11))


@settings(max_examples=60, deadline=None)
@given(fields=st.lists(st.text() | st.none(), min_size=5, max_size=5),
       status=st.sampled_from(protocol.STATUSES), limit=st.sampled_from((None,) + protocol.LIMITS),
       nonce=st.integers(0, 2**64 - 1))
def test_result_frames_round_trip(fields, status, limit, nonce):
    reply = dict(zip(protocol.FIELDS, fields), status=status, limit=limit, duration_s=0.5,
                 cpu_s=0.25)
    reply["error_last_line"] = reply["error_last_line"] if reply["error"] is not None else None
    body = protocol.Decoder().feed(protocol.encode_result(nonce, reply))[0]
    got = protocol.decode_result(body, 1 << 20)
    assert got["nonce"] == nonce and got["status"] == status and got["duration_s"] == 0.5
    assert got["limit"] == (limit if status == "killed" else None)
    for name in ("stdout", "stderr"):
        assert got[name] == capture.sanitize(reply[name] or "")
    assert got["value"] == (None if reply["value"] is None else capture.sanitize(reply["value"]))


@pytest.mark.parametrize("mutate, words", [
    (lambda b: b[:1] + bytes([b[1]]) + b[2:], None),           # untouched: valid
    (lambda b: b"X" + b[1:], "not a result"),
    (lambda b: b[:9] + bytes([99]) + b[10:], "unknown result kind"),
    (lambda b: b + b"junk", "do not add up"),
])
def test_result_frames_are_validated(mutate, words):
    reply = {"status": "ok", "stdout": "hi", "duration_s": float("nan"), "cpu_s": -3.0}
    body = mutate(protocol.encode_result(7, reply)[4:])
    if words is None:
        got = protocol.decode_result(body, 100)
        assert got["duration_s"] == 0.0 and got["cpu_s"] == 0.0  # clamped, never trusted
    else:
        with pytest.raises(protocol.ProtocolError, match=words):
            protocol.decode_result(body, 100)
    with pytest.raises(protocol.ProtocolError, match="exceeds"):
        protocol.decode_result(protocol.encode_result(7, {"status": "ok", "stdout": "x" * 101})[4:],
                               100)


def test_lone_surrogates_travel_and_are_sanitized():
    reply = {"status": "ok", "stdout": "\ud800x"}
    body = protocol.encode_result(1, reply)[4:]
    assert protocol.decode_result(body, 100)["stdout"] == "?x"
    assert capture.sanitize("\ud800x") == "?x"


def test_truncate_text_keeps_head_and_tail():
    text, dropped = capture.truncate_text("a" * 60 + "b" * 1000 + "c" * 40, 100)
    assert dropped == 1000 and text.startswith("a" * 60 + "b" * 15) and text.endswith("c" * 25)
    assert "[1000 characters truncated]" in text
    assert capture.truncate_text("short", 100) == ("short", 0)


def test_capped_stream_writes_head_to_fd_and_keeps_tail():
    fd = os.memfd_create("t")
    try:
        stream = capture.CappedText(100, fd)
        for i in range(1000):
            stream.write(f"{i:04d}\n")
        head, _ = capture.read_fd(fd, 100)
        tail, dropped = stream.overflow()
        assert head.startswith("0000\n0001\n") and len(head) == 75
        assert tail.endswith("0999\n") and len(tail) == 25
        assert dropped == 5000 - 100
        with pytest.raises(TypeError):
            stream.write(b"bytes")
        stream.buffer.write(b"ok")
        capture.reset_fd(fd)
        assert capture.read_fd(fd, 100) == ("", 0)
    finally:
        os.close(fd)


def test_read_fd_cuts_large_files():
    fd = os.memfd_create("t")
    try:
        os.write(fd, b"H" * 100 + b"M" * 100_000 + b"T" * 100)
        text, dropped = capture.read_fd(fd, 200)
        assert text.startswith("H" * 100) and text.endswith("T" * 50) and dropped > 99_000
    finally:
        os.close(fd)


@pytest.mark.parametrize("kw, msg", [
    ({"timeout_s": 0}, "timeout_s"), ({"memory_mb": 1.5}, "memory_mb"),
    ({"nproc": -1}, "nproc"), ({"nofile": 8}, "nofile"), ({"max_output_chars": 0}, "max_output"),
    ({"cpu_s": True}, "cpu_s")])
def test_limits_reject_bad_values(kw, msg):
    with pytest.raises(ValueError, match=msg):
        Limits(**kw)


def test_limits_allow_none_to_lift_a_limit():
    lim = Limits(memory_mb=None, nproc=None)
    assert lim.process_limits()["memory_mb"] is None


@pytest.mark.parametrize("kw, msg", [({"isolation": "docker"}, "isolation"),
                                     ({"spares": -1}, "spares"), ({"max_sessions": 0}, "max_"),
                                     ({"disk_mb": 0}, "disk_mb")])
def test_pool_config_rejects_bad_values(kw, msg):
    with pytest.raises(ValueError, match=msg):
        PoolConfig(**kw)


def test_allow_list_has_python_but_not_the_project():
    paths = allowed_paths()
    assert any(os.path.realpath(p) == "/usr" or p == "/usr" for p in paths)
    for p in paths:  # nothing of the project except, possibly, a virtualenv inside it
        if p.startswith(str(REPO) + "/"):
            assert any((d / "pyvenv.cfg").exists() for d in [Path(p), *Path(p).parents]), p
    args = " ".join(_bwrap_args(paths, privileged=False))
    assert str(REPO / "tir_envs") not in args.replace(str(REPO / "tir_envs" / "tools" / "python"
                                                          / "sandbox"), "")
    assert "/etc" not in args.split() and "--unshare-net" in args and "--die-with-parent" in args


def test_dedupe_keeps_outermost_paths():
    assert _dedupe(["/usr/lib/python3", "/usr", "/opt/a/b", "/opt/a"]) == ["/usr", "/opt/a"]


def test_launch_spec_passes_a_clean_environment():
    spec = launch_spec("unshare", 5, ("math",), 64)
    assert spec.env == sandbox_env() and "SECRET" not in json.dumps(spec.env)
    config = json.loads(spec.argv[-1])
    assert config["ctrl_fd"] == 5 and config["isolation"] == "unshare"
    assert config["new_root"] not in ("/usr", "/")
    with pytest.raises(ValueError, match="isolation"):
        launch_spec("docker", 5, (), 64)
    assert MODES == ("bwrap", "unshare", "rlimits")


def test_execution_renders_per_error_style():
    exe = Execution(Status.ERROR, stdout="out\n", stderr="warn\n",
                    error="Traceback (most recent call last):\n  ...\nValueError: bad",
                    error_last_line="ValueError: bad")
    assert exe.render("full") == "out\nwarn\nTraceback (most recent call last):\n  ...\nValueError: bad"
    assert exe.render("last_line") == "out\nwarn\nValueError: bad"
    ok = Execution(Status.OK, stdout="1\n", value="2")
    assert ok.render() == "1\n2"


@pytest.mark.parametrize("reply, status, lost, words", [
    ({"status": "timeout", "lost": True}, Status.TIMEOUT, True, "time limit"),
    ({"status": "killed", "lost": True, "signal": 9}, Status.KILLED, True, "SIGKILL"),
    ({"status": "killed", "lost": True, "code": 3}, Status.KILLED, True, "code 3"),
    ({"status": "killed", "lost": True, "signal": 9, "timed_out": True}, Status.TIMEOUT, True,
     "time limit"),
    ({"status": "killed", "cause": "protocol", "lost": True}, Status.KILLED, True, "malformed"),
    ({"status": "infra_error", "lost": True, "error": "boom"}, Status.INFRA_ERROR, True, "boom"),
    ({"op": "result", "status": "killed", "limit": "memory", "error": "MemoryError", "error_last_line": "MemoryError"},
     Status.KILLED, False, "MemoryError"),
    ({"op": "result", "status": "timeout", "error": "Traceback (most recent call last):\n  x\n"
                                                  "KeyboardInterrupt"},
     Status.TIMEOUT, False, "TimeoutError"),
])
def test_pool_replies_map_to_statuses(reply, status, lost, words):
    exe = execution_from_reply(reply, Limits(timeout_s=2))
    assert exe.status == status and exe.lost_state == lost and words in exe.render()
    assert "KeyboardInterrupt" not in exe.render()


def test_any_backend_outcome_is_bounded_and_typed():
    """Whatever a backend hands back (a Ray host, E2B, a buggy one): wrong types become empty
    text, every string is capped, control bytes escaped, metadata stays small (issue 12)."""
    exe = Execution(Status.ERROR, stdout={"forged": 1}, stderr="\x1b[2J" + "e" * 50_000,
                    value="v" * 50_000, error="A" * 12_000_000, error_last_line="A" * 12_000_000,
                    duration_s="soon", details={"cpu_s": float("nan"), "signal": 9,
                                                "isolation": "bwrap\x00", "stdout": "x" * 99})
    b = exe.bounded(100)
    assert b.stdout == "" and b.duration_s == 0.0 and b.truncated
    assert all(len(t) < 200 for t in (b.stderr, b.value, b.error, b.error_last_line))
    assert b.stderr.startswith("\\x1b[2J")
    meta = b.metadata()
    assert meta["signal"] == 9 and meta["isolation"] == "bwrap\\x00"
    assert "cpu_s" not in meta and "stdout" not in meta
    assert sum(len(str(v)) for v in meta.values()) < 400


def test_a_failing_backend_is_infra_error_never_an_exception():
    import asyncio

    from tir_envs.tools.python import PythonTool, SandboxBackend

    class Broken(SandboxBackend):
        name = "broken"

        async def open(self, limits):
            return object()

        async def run(self, handle, code, limits):
            raise KeyError("bug")

        async def close(self, handle):
            return None

    tool = PythonTool(backend=Broken())
    r = asyncio.run(tool.call({"code": "1"}, asyncio.run(tool.open_session())))
    assert r.status == Status.INFRA_ERROR and "not your fault" in r.text


def test_awaitable_hands_over_results_errors_and_cancellation():
    """The pool's futures seen from an event loop: results and errors arrive (many at once,
    completed from another thread, in one wake-up), and cancelling the awaiting side cancels
    the pool's future, as with asyncio.wrap_future."""
    import asyncio
    import concurrent.futures as cf
    import threading

    from tir_envs.tools.python.pool.reactor import awaitable

    async def main():
        futs = [cf.Future() for _ in range(50)]
        waiters = [awaitable(f) for f in futs]
        bad, bad_waiter = cf.Future(), None
        bad_waiter = awaitable(bad)

        def complete():
            for i, f in enumerate(futs):
                f.set_result(i)
            bad.set_exception(ValueError("boom"))
        threading.Thread(target=complete).start()
        assert await asyncio.gather(*waiters) == list(range(50))
        with pytest.raises(ValueError, match="boom"):
            await bad_waiter
        pending = cf.Future()
        waiter = awaitable(pending)
        waiter.cancel()
        await asyncio.sleep(0)
        assert pending.cancelled()
        done = cf.Future()
        done.set_result("already")
        assert await awaitable(done) == "already"

    asyncio.run(main())
    late = cf.Future()

    async def leave_waiting():
        awaitable(late)
    asyncio.run(leave_waiting())
    late.set_result(1)  # the loop is closed: completing must not raise in this thread


def test_the_wire_speaks_the_one_status_vocabulary():
    """What an interpreter may claim is a word of ``Status`` (the sandbox package cannot import
    it), never ``infra_error``: only the host observes that."""
    from tir_envs.status import CALL, Status
    assert set(protocol.STATUSES) < {s.value for s in CALL}
    assert Status.INFRA_ERROR.value not in protocol.STATUSES
    with pytest.raises(ValueError, match="turn's status"):
        execution_from_reply({"op": "result", "status": "no_call"}, Limits())
