"""How one call runs in a session: the request, the frames the session sends, and the end
of the call as the host observed it.  A mixin of ``SandboxPool`` (``sandbox_pool.py``), on the
reactor thread: the pool owns the sessions, this is the code that drives one call.

Trust: a reply is data from untrusted code.  It is bounded (frame cap from the output limit),
parsed without recursion, must carry the nonce of its request, and cannot choose a host
status: ``timeout`` counts only when the host interrupted the cell.  What one call may cost
the host is bounded (``CallBudget``: frames, bytes, the reactor's CPU): past it the host
reads nothing more from the session and the call ends at its deadline as ``flood``
(``killed``), so no session can stall the one reactor thread that serves all, nor make the
host restart sessions faster than one per call deadline.  A result ends a call only
once the session is stopped (``cgroups.SessionCgroup.stop``) and the kernel shows the
interpreter waiting for its next request (``_check_over``): a frame the code wrote while its
cell runs ends nothing, and nothing of a session runs outside a call's deadline.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import time
from dataclasses import dataclass
from typing import Any

from tir_envs.status import Status
from tir_envs.tools.python.pool.fork_servers import ForkServerState
from tir_envs.tools.python.sandbox import protocol
from tir_envs.tools.python.sandbox.protocol import Op
from tir_envs.tools.python.pool.session import (BUSY, ENDED, MAX_HELLO, PendingCall, SessionHandle,
                                           SessionState)

S = SessionState
EXIT_WAIT_S = 1.0        # after a session's socket closes mid-run: how long to wait for its exit
QUICK_LOOKS = 4          # loop rounds a reply waits for its interpreter to block, before a stop


@dataclass(frozen=True)
class CallBudget:
    """What one call may send the host and cost it.  The interpreter sends one result frame
    per call, whose decoding and the stop around it take well under a millisecond of the
    reactor thread; anything near these bounds was written by the code itself."""

    frames: int = 8              # result frames read during one call
    frame_caps: float = 1.25     # bytes read, in result frame caps (``result_frame_cap``)
    host_cpu_s: float = 0.25     # the reactor's CPU for its frames after the first, and its
                                 # stops and looks after the quick ones (a normal call: none)

    def exceeded(self, run: PendingCall) -> str | None:
        """Why ``run`` is over its budget, or None."""
        if run.frames > self.frames:
            return f"more than {self.frames} frames"
        if run.bytes_in > self.frame_caps * protocol.result_frame_cap(run.max_chars):
            return f"more than {self.frame_caps:g} result frames' worth of bytes"
        if run.host_cpu_s > self.host_cpu_s:
            return f"more than {self.host_cpu_s * 1000:g} ms of the host's CPU"
        return None


BUDGET = CallBudget()


def resolve(fut: cf.Future, value: Any) -> None:
    """Complete ``fut`` unless it already is (a timer and an event may race)."""
    if not fut.done():
        try:
            fut.set_result(value)
        except cf.InvalidStateError:
            pass


class SessionCalls:
    """The call life cycle of ``SandboxPool`` (see the module docstring)."""

    # ---------------------------------------------------------------- running
    def _run(self, handle: SessionHandle, fut: cf.Future, code: str, limits: dict,
             timeout_s: float, max_chars: int) -> None:
        if not fut.set_running_or_notify_cancel():
            return
        if handle.state in BUSY:
            handle.queue.append((fut, code, limits, timeout_s, max_chars))
            return
        if handle.state is not S.IDLE:
            self._answer_dead(handle, fut)
            return
        self._start_run(handle, fut, code, limits, timeout_s, max_chars)

    def _start_run(self, handle: SessionHandle, fut: cf.Future, code: str, limits: dict,
                   timeout_s: float, max_chars: int) -> None:
        if not handle.configured:
            handle.queue.appendleft((fut, code, limits, timeout_s, max_chars))
            self._configure(handle, limits)
            return
        run = handle.run = PendingCall(fut, timeout_s, int(max_chars),
                                        self._nonces.getrandbits(64))
        msg = {"op": Op.RUN, "code": code, "max_chars": run.max_chars, "nonce": run.nonce}
        handle.move(S.RUNNING)
        handle.runs += 1
        handle.fault = "model"
        handle.decoder.max_frame = protocol.result_frame_cap(run.max_chars)
        run.timer = self.reactor.call_later(timeout_s, self._on_deadline, handle, run)
        self._send(handle, protocol.encode(msg))
        if handle.cgroup is not None:  # after the send: the interpreter wakes to its request
            handle.cgroup.cont()

    def _configure(self, handle: SessionHandle, limits: dict) -> None:
        """Set the session up before any code of the model is sent: its cgroup limits here,
        then its own limits and lock-down in the interpreter, acknowledged by a ``setup_ok``
        frame.  Until that frame arrives no code has run in the session, so what it says
        (and any failure on the way) is the sandbox's own: ``infra``.  After it, nothing the
        session writes is ever read as a setup outcome (see docs/sandbox.md, statuses)."""
        handle.configured = True
        handle.move(S.CONFIGURING)
        if handle.cgroup is not None:
            try:
                handle.cgroup.set_limits(limits.get("memory_mb"), limits.get("nproc"))
            except OSError as e:
                self._kill(handle, f"cannot set the session's cgroup limits: {e}")
                return
        handle.decoder.max_frame = MAX_HELLO
        handle.timer = self.reactor.call_later(self.config.ready_timeout_s, self._setup_timeout,
                                               handle)
        self._send(handle, protocol.encode({"op": Op.SETUP, "limits": limits,
                                            "fresh": handle.fresh}))

    def _setup_timeout(self, handle: SessionHandle) -> None:
        if handle.state is S.CONFIGURING:
            self._kill(handle, "the session did not acknowledge its setup in time")

    def _on_setup_reply(self, handle: SessionHandle, body: bytes) -> None:
        """The interpreter's answer to ``setup`` (no code of the model has run yet)."""
        handle.timer.cancel()
        msg = protocol.parse_small_json(body)
        if msg is None or msg.get("op") != Op.SETUP_OK:
            error = str(msg.get("error"))[:500] if msg else "not a setup acknowledgement"
            self._kill(handle, f"session setup failed: {error}")
            return
        self.protections.check_setup(msg)
        handle.move(S.IDLE)
        handle.decoder.max_frame = 0  # nothing may arrive until the first request
        self._next_queued(handle)

    def _dead_reply(self, handle: SessionHandle) -> dict:
        """The reply to a call on a session that can run no more: the model's outcome when
        its code ran there and the fork server confirmed the exit, else infrastructure."""
        if (handle.fault == "model" and handle.exit is not None
                and handle.fork_server.state is not ForkServerState.DEAD):
            ex = handle.exit
            return {"status": Status.KILLED, "lost": True, "between_calls": True,
                    "signal": ex.get("signal") or ex.get("keeper_signal"), "code": ex.get("code")}
        return {"status": Status.INFRA_ERROR, "lost": True,
                "error": handle.dead_reason or f"the session is {handle.state}"}

    def _answer_dead(self, handle: SessionHandle, fut: cf.Future) -> None:
        """Answer a call on a dead session, waiting briefly for the fork server's word on how
        it ended when the model's code may be why."""
        if (handle.fault == "model" and handle.exit is None
                and handle.fork_server.state is not ForkServerState.DEAD):
            run = PendingCall(fut, 0.0)
            handle.dying_run = run
            self.reactor.call_later(EXIT_WAIT_S, self._finish_killed, handle, run)
            return
        resolve(fut, self._dead_reply(handle))

    def _on_deadline(self, handle: SessionHandle, run: PendingCall) -> None:
        if handle.run is not run:
            return
        if run.over_budget is not None:
            handle.run = None
            resolve(run.future, {"status": Status.KILLED, "cause": "flood", "lost": True,
                                 "error": f"the session "
                                 f"sent the host {run.over_budget} in one call"})
            self._kill(handle, f"over the call budget: {run.over_budget}")
            return
        grace = self.config.interrupt_grace_s
        if not run.interrupted and grace > 0:
            run.interrupted = True
            handle.move(S.INTERRUPTING)
            self._signal(handle, "INT")
            run.timer = self.reactor.call_later(grace, self._on_deadline, handle, run)
            return
        handle.run = None
        self.counters["timeouts_killed"] += 1
        resolve(run.future, {"status": Status.TIMEOUT, "lost": True,
                             "timeout_s": run.timeout_s})
        self._kill(handle, "killed after a timeout")

    def _on_result(self, handle: SessionHandle, run: PendingCall, reply: dict) -> None:
        """A valid result frame.  The call ends only when the host sees the cell over: every
        process of the session stopped and the interpreter blocked reading its next request.
        A frame that came while the interpreter still runs (written by the code itself) ends
        nothing: the session runs on under the call's deadline, re-checked now and then."""
        run.reply = reply
        if run.recheck is None:
            self._check_over(handle, run, 0.001)

    def _check_over(self, handle: SessionHandle, run: PendingCall, delay: float) -> None:
        run.recheck = None
        if handle.run is not run or run.over_budget is not None:
            return
        if run.looks < QUICK_LOOKS:  # the usual end of a call: a look or a few, one stop
            self._look(handle, run, delay)
            return
        started = time.thread_time()
        try:
            self._look(handle, run, delay)
        finally:
            self._charge(handle, run, time.thread_time() - started)

    def _look(self, handle: SessionHandle, run: PendingCall, delay: float) -> None:
        """Whether the cell is over: if so, answer; if not, look again later."""
        cgroup = handle.cgroup
        if cgroup is not None:
            # Usually the interpreter already waits when its result is read: seen so before
            # the SIGSTOP, it can run no code of the model after it (a stop lands before any
            # return to user space), and no wait for the stop to land is needed.
            before = cgroup.interpreter_state(settle=False)
            if before == "busy" and run.looks < QUICK_LOOKS:
                # Replies are read the moment they are written, usually before the interpreter
                # has blocked for its next request.  Look again once this round's other events
                # are handled (no timer: epoll waits whole milliseconds): it has blocked by
                # then, and no SIGSTOP had to land first.
                run.looks += 1
                run.recheck = self.reactor.call_later(0, self._check_over, handle, run, delay)
                return
            stopped = cgroup.stop()
            state = (before if before in ("waiting", "unknown") else
                     cgroup.interpreter_state()) if stopped else "unsettled"
            if state == "waiting" and before != "waiting":
                stopped = cgroup.stop()  # a fork it began before its stop landed: counted now
                state = state if stopped else "unsettled"
            if not stopped:  # not frozen in time: what it stopped runs on until the next look
                self.counters["stops_not_frozen_in_time"] += 1
                cgroup.cont()
            if state in ("busy", "unsettled"):
                self.counters[f"results_while_{state}"] += 1
                if state == "busy":  # not over: let it run on (the deadline still holds)
                    cgroup.cont()
                run.recheck = self.reactor.call_later(delay, self._check_over, handle, run,
                                                      min(2 * delay, 0.05))
                return
        self._finish_run(handle, run.reply)

    def _finish_run(self, handle: SessionHandle, reply: dict) -> None:
        """The cell is over (the session stopped, when it has cgroups): answer.  The status
        the reply claims is only taken where the host agrees (``timeout`` needs an interrupt)."""
        run, handle.run = handle.run, None
        if run.timer:
            run.timer.cancel()
        status = reply["status"]
        if run.interrupted and status in ("timeout", "error"):
            reply = {**reply, "status": Status.TIMEOUT, "timeout_s": run.timeout_s}
        elif status == "timeout":
            reply = {**reply, "status": Status.ERROR}
        handle.move(S.IDLE)
        handle.decoder.max_frame = 0  # nothing may arrive until the next request
        resolve(run.future, reply)
        self._next_queued(handle)

    def _next_queued(self, handle: SessionHandle) -> None:
        while handle.queue and handle.state is S.IDLE:
            fut, code, limits, timeout_s, max_chars = handle.queue.popleft()
            if not fut.done():
                self._start_run(handle, fut, code, limits, timeout_s, max_chars)

    def _abandon(self, handle: SessionHandle, fut: cf.Future) -> None:
        if handle.run is not None and handle.run.future is fut:
            handle.run = None
            resolve(fut, {"status": Status.INFRA_ERROR, "lost": True, "error": "the call was abandoned"})
            self._kill(handle, "the call was abandoned while running")
        else:
            handle.queue = collections.deque(q for q in handle.queue if q[0] is not fut)
            resolve(fut, {"status": Status.INFRA_ERROR, "lost": True, "error": "the call was abandoned"})

    # ---------------------------------------------------------------- socket events
    def _send(self, handle: SessionHandle, data: bytes) -> None:
        handle.out += data
        self._flush(handle)

    def _flush(self, handle: SessionHandle) -> None:
        sock = handle.sock
        if sock is None:
            return
        try:
            while handle.out:
                n = sock.send(handle.out)
                del handle.out[:n]
        except BlockingIOError:
            self.reactor.watch(sock, self._reader(handle), lambda: self._flush(handle))
            return
        except OSError:
            self._on_eof(handle)
            return
        self.reactor.watch(sock, self._reader(handle))

    def _reader(self, handle: SessionHandle):
        """The read callback of ``handle``'s socket: none once its call is over budget (a
        level-triggered selector would call it for the unread bytes in every loop round)."""
        run = handle.run
        if run is not None and run.over_budget is not None:
            return None
        return lambda: self._on_readable(handle)

    def _on_readable(self, handle: SessionHandle) -> None:
        run = handle.run
        if run is None or not run.frames:  # the call's first frame: bounded by its bytes
            self._read(handle, run)
            if run is not None:
                self._charge(handle, run, 0.0)
            return
        if run.over_budget is not None:
            return
        started = time.thread_time()  # a syscall: only once a call is out of the ordinary
        try:
            self._read(handle, run)
        finally:
            self._charge(handle, run, time.thread_time() - started)

    def _read(self, handle: SessionHandle, run: PendingCall | None = None) -> None:
        sock = handle.sock
        if sock is None:
            return
        try:
            data = sock.recv(1 << 18)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._on_eof(handle)
            return
        handle.decoder.push(data)
        if run is not None:
            run.bytes_in += len(data)
        while handle.sock is not None:  # each frame checked against the cap of the state
            try:                        # the previous one led to
                body = handle.decoder.pop()
            except protocol.ProtocolError as e:
                self._violation(handle, str(e))
                return
            if body is None:
                return
            if run is not None and handle.run is run:
                run.frames += 1
                if BUDGET.exceeded(run):
                    return  # ended by ``_charge``, whatever else the buffer holds
            self._on_frame(handle, body)

    def _charge(self, handle: SessionHandle, run: PendingCall, cpu_s: float) -> None:
        """Count the reactor's CPU against the call.  Past its budget the host reads nothing
        more from the session (its writers block on a full socket, costing nobody anything)
        and the call ends at its deadline (``_on_deadline``: ``flood``, the model's outcome),
        so a flooding episode gets one new session per call deadline at most."""
        run.host_cpu_s += cpu_s
        if handle.run is not run or run.over_budget is not None:
            return
        why = BUDGET.exceeded(run)
        if why is None:
            return
        self.counters["calls_over_budget"] += 1
        run.over_budget = why
        if run.recheck is not None:
            run.recheck.cancel()
            run.recheck = None
        if handle.sock is not None:
            self.reactor.watch(handle.sock, None)

    def _on_frame(self, handle: SessionHandle, body: bytes) -> None:
        """One frame body from a session, validated before anything believes it."""
        run = handle.run
        if handle.state is S.SPAWNING:
            self._on_hello(handle, body)
        elif handle.state is S.CONFIGURING:
            self._on_setup_reply(handle, body)
        elif handle.state in (S.RUNNING, S.INTERRUPTING) and run is not None:
            try:
                reply = protocol.decode_result(body, protocol.field_cap(run.max_chars))
            except protocol.ProtocolError as e:
                self._violation(handle, str(e))
                return
            if reply["nonce"] != run.nonce:
                self._violation(handle, "a result for another request (written by the code?)")
                return
            self._on_result(handle, run, reply)
        else:
            self._violation(handle, f"unexpected message while {handle.state}")

    def _violation(self, handle: SessionHandle, why: str) -> None:
        """The session sent something invalid: its code tampered with the channel (the
        model's outcome, ``killed``) or, before any code ran, it is broken."""
        self.counters["protocol_violations"] += 1
        run, handle.run = handle.run, None
        if run is not None:
            resolve(run.future, {"status": Status.KILLED, "cause": "protocol", "lost": True,
                                  "error": f"the interpreter broke the protocol ({why})"})
        self._kill(handle, f"protocol violation: {why}")

    def _on_eof(self, handle: SessionHandle) -> None:
        """The session's socket closed: its interpreter is gone (or closed the socket)."""
        self._drop_socket(handle)
        run, handle.run = handle.run, None
        if handle.state in ENDED:
            return
        self._mark_dead(handle, "the interpreter exited between calls")
        self._signal(handle, "TERM")  # in case it only closed the socket
        self._watch_exit(handle)
        if run is not None:
            if run.timer:
                run.timer.cancel()
            handle.dead_reason = "the interpreter died during a call"
            handle.dying_run = run
            if handle.exit is not None:
                self._finish_killed(handle, run)
            else:
                self.reactor.call_later(EXIT_WAIT_S, self._finish_killed, handle, run)
        self._top_up()

    def _finish_killed(self, handle: SessionHandle, run: PendingCall) -> None:
        """A session died during (or before) a call: the model's outcome, unless the fork
        server is gone (then nobody can tell, and it is ours)."""
        handle.dying_run = None
        if run.future.done():
            return
        if handle.fork_server.state is ForkServerState.DEAD or handle.fault != "model":
            resolve(run.future, {"status": Status.INFRA_ERROR, "lost": True,
                                  "error": handle.dead_reason or "the fork server died"})
            return
        ex = handle.exit or {}
        resolve(run.future, {"status": Status.KILLED, "lost": True,
                              "signal": ex.get("signal") or ex.get("keeper_signal"),
                              "code": ex.get("code"), "timed_out": run.interrupted})
