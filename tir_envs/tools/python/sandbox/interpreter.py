"""The persistent interpreter of one session: run code cells as a notebook does.

Each ``run`` compiles the cell under its own file name (``<cell-N>``, registered with
``linecache`` so tracebacks show the source), executes it in one ``__main__`` namespace that
lives as long as the session, shows the value of a final bare expression (like a notebook's
``Out[N]``, whenever it is not ``None``), and returns what was printed, the trimmed traceback
and how the cell ended.  ``serve`` is the request loop on the session's socket.
"""

from __future__ import annotations

import ast
import linecache
import os
import resource
import signal
import sys
import time
import traceback
import types

from . import capture, jail, protocol


#: CPython 3.11.0–3.11.7 and 3.12.0–3.12.1 keep one AST-construction depth counter per
#: interpreter (python/cpython#106905): an ``ast.parse`` in another thread, or in a finalizer the
#: garbage collector runs while a tree is being built, makes a correct parse fail with
#: ``SystemError: AST constructor recursion depth mismatch``.  A cell's own threads can do that
#: to the next cell.  Parsing is pure, so that one failure is retried.
AST_RETRIES = 8


def parse_source(code: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """``ast.parse`` that survives CPython's AST-constructor race (``AST_RETRIES``)."""
    for attempt in range(AST_RETRIES):
        try:
            return ast.parse(code, filename, mode)
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc) or attempt == AST_RETRIES - 1:
                raise
    raise AssertionError("unreachable")


class CPULimitExceeded(BaseException):
    """Raised in the cell when the session's CPU-seconds limit is reached.

    A ``BaseException`` so that a bare ``except Exception`` in the cell does not swallow it.
    """


def _cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


_OWN_FILES = {os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
              for name in ("interpreter.py", "zygote.py", "capture.py", "jail.py")}


def _trim(stack: traceback.StackSummary) -> traceback.StackSummary:
    """Keep the frames from the first cell frame on, minus the sandbox's own (a signal
    handler that raised the interrupt, for instance)."""
    frames = list(stack)
    for i, frame in enumerate(frames):
        if frame.filename.startswith("<cell-"):
            frames = frames[i:]
            break
    else:  # raised before any cell frame ran (a syntax error): the message says it all
        frames = []
    return traceback.StackSummary.from_list(
        [f for f in frames if os.path.abspath(f.filename) not in _OWN_FILES])


def format_error(exc: BaseException, limit: int) -> tuple[str, str]:
    """(full trimmed traceback, last line) of an exception raised by a cell."""
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__, compact=True)
    node, seen = te, set()
    while node is not None and id(node) not in seen:  # every exception of the chain
        seen.add(id(node))
        node.stack = _trim(node.stack)
        node = node.__cause__ or node.__context__
    full = "".join(te.format())
    last = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()
    full, _ = capture.truncate_text(capture.sanitize(full.rstrip("\n")), limit)
    last_line, _ = capture.truncate_text(capture.sanitize(last[-1] if last else
                                                          type(exc).__name__), limit)
    return full, last_line


class Interpreter:
    """One ``__main__`` namespace, its cells, and the captured streams."""

    def __init__(self, limit: int = 10_000):
        module = types.ModuleType("__main__")
        module.__dict__["__builtins__"] = __builtins__
        sys.modules["__main__"] = module
        self.namespace = module.__dict__
        self.cell = 0
        self.running = False
        self.interrupted = False
        self.child = 0           # the forked child running a stateless cell, if any
        self.stdout = capture.CappedText(limit, 1)
        self.stderr = capture.CappedText(limit, 2)

    # --------------------------------------------------------------- signals
    def install_signal_handlers(self) -> None:
        """SIGINT interrupts a running cell (the host's soft timeout); SIGXCPU (the CPU soft
        limit) raises ``CPULimitExceeded``; a too-large file write fails instead of killing."""
        signal.signal(signal.SIGINT, self._on_sigint)
        signal.signal(signal.SIGXCPU, self._on_sigxcpu)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    def _on_sigint(self, signum, frame):
        if self.child:  # a stateless template: the cell runs in its child
            try:
                os.kill(self.child, signal.SIGINT)
            except OSError:
                pass
            return
        if self.running:
            self.interrupted = True
            raise KeyboardInterrupt

    def _on_sigxcpu(self, signum, frame):
        if self.running:
            raise CPULimitExceeded("CPU time limit exceeded")

    # --------------------------------------------------------------- running
    def _compile(self, code: str, filename: str):
        tree = parse_source(code, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        body = compile(tree, filename, "exec")
        return body, (compile(last, filename, "eval") if last is not None else None)

    def run(self, code: str, limit: int, new_fds: bool = False) -> dict:
        """Execute one cell; never raises.  ``status``: ok, error, timeout, or killed with the
        ``limit`` (cpu, memory) that stopped it.  ``new_fds``: fd 1 and 2 are files made for
        this cell (a stateless cell's), so there is nothing to empty."""
        self.cell += 1
        filename = f"<cell-{self.cell}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        for stream, fd in ((self.stdout, 1), (self.stderr, 2)):
            stream.reset(limit)
            if not new_fds:
                capture.reset_fd(fd)
        sys.stdout, sys.stderr = self.stdout, self.stderr
        start, cpu0 = time.perf_counter(), _cpu_seconds()
        status, hit, value, exc = "ok", None, None, None
        self.interrupted = False
        try:
            body, expr = self._compile(code, filename)
            self.running = True
            try:
                exec(body, self.namespace)
                if expr is not None:
                    value = eval(expr, self.namespace)
            finally:
                self.running = False
        except SystemExit as e:
            if e.code not in (None, 0):
                status, exc = "error", e
        except KeyboardInterrupt as e:
            status, exc = ("timeout" if self.interrupted else "error"), e
        except CPULimitExceeded as e:
            status, exc, hit = "killed", e, "cpu"
        except MemoryError as e:
            status, exc, hit = "killed", e, "memory"
        except BaseException as e:  # noqa: BLE001 - everything the cell raised is its result
            status, exc = "error", e
        return self._reply(status, hit, value, exc, limit, start, cpu0)

    def _reply(self, status, hit, value, exc, limit, start, cpu0) -> dict:
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        out, err = self._streams(limit)
        reply = {"op": protocol.Op.RESULT, "status": status, "limit": hit,
                 "stdout": out[0], "stderr": err[0],
                 "truncated": bool(out[1] or err[1]), "value": None, "error": None,
                 "error_last_line": None, "duration_s": time.perf_counter() - start,
                 "cpu_s": _cpu_seconds() - cpu0}
        if exc is not None:
            try:
                reply["error"], reply["error_last_line"] = format_error(exc, limit)
            except BaseException as e:  # noqa: BLE001 - a hostile __str__ must not kill us
                reply["error"] = reply["error_last_line"] = f"{type(exc).__name__} ({e!r})"[:limit]
        elif value is not None:
            reply["value"], dropped = self._repr(value, limit)
            reply["truncated"] = reply["truncated"] or bool(dropped)
        return reply

    def _repr(self, value, limit: int) -> tuple[str, int]:
        try:
            text = repr(value)
        except BaseException as e:  # noqa: BLE001
            text = f"<repr of {type(value).__name__} failed: {type(e).__name__}: {e}>"
        return capture.truncate_text(capture.sanitize(text), limit)

    def _streams(self, limit: int):
        """(text, dropped) of stdout and stderr: the fd's file, then the Python-level
        overflow that did not fit in it."""
        result = []
        for stream, fd in ((self.stdout, 1), (self.stderr, 2)):
            text, dropped = capture.read_fd(fd, limit)
            tail, tail_dropped = stream.overflow()
            if tail_dropped:
                text += capture.marker(tail_dropped)
            text += tail
            dropped += tail_dropped
            if len(text) > limit + 200:
                text, extra = capture.truncate_text(text, limit)
                dropped += extra
            result.append((capture.sanitize(text), dropped))
        return result


def _signal_others(sig: int) -> None:
    """As init of the session's pid namespace: signal every other process of the session."""
    try:
        os.kill(-1, sig)
    except OSError:
        pass


#: What a stateless template runs itself once it is set up (constant code, never the model's):
#: each path a cell takes through this package (output printed, a value shown, an error
#: formatted), several times, so that CPython's adaptive interpreter warms and specialises
#: that code once in the template instead of in every cell: a code object run for the first
#: time is written to (its warm-up counter, then its specialised instructions), and in a
#: forked cell each such write copies a page.
WARM_UP = ("print(0)\n0", "raise ValueError(0)")
WARM_UP_ROUNDS = 10


def warm_up(interp: Interpreter) -> None:
    """Run ``WARM_UP`` in ``interp``, then forget it (cell numbers, sources)."""
    for _ in range(WARM_UP_ROUNDS):
        for code in WARM_UP:
            interp.run(code, 100)
    for n in range(1, interp.cell + 1):
        linecache.cache.pop(f"<cell-{n}>", None)
    interp.cell = 0


def _setup(sock, req: dict, context: dict, interp: Interpreter) -> bool:
    """The session's one-time setup, before any code of the model: apply its limits and lock
    it down, then acknowledge.  Returns whether every cell forks a fresh interpreter.

    The host sends no code before it has read this acknowledgement, so the only frames it
    ever takes as a setup outcome are written here, by the sandbox alone."""
    fresh = bool(req.get("fresh"))
    try:
        jail.apply_limits(req.get("limits") or {}, context.get("base_vm", 0),
                          context.get("shared_nproc", False))
        info = context["prepare"](fresh)
    except (OSError, ValueError) as e:
        protocol.send(sock, {"op": protocol.Op.SETUP_ERROR, "error": str(e)})
        os._exit(5)
    if fresh:
        warm_up(interp)
    protocol.send(sock, {"op": protocol.Op.SETUP_OK, **info})
    return fresh


def serve(sock, context: dict) -> None:
    """Answer requests on ``sock`` until it closes.  Runs in the session's own process.

    The first request is ``setup`` (limits, and whether the session is stateless); every
    later one a ``run``.  With ``stop_others`` (a pid namespace of our own but no host-side
    stopping), every other process of the session is stopped between cells and continued
    when the next one starts.  A stateless session runs each cell in a forked child
    (``fresh_cell``) and stays the warm template of the next one.
    """
    interp = Interpreter()
    interp.install_signal_handlers()
    stop_others = context.get("stop_others", False)
    protocol.send(sock, {"op": protocol.Op.READY, "pid": os.getpid(), **context.get("info", {})})
    fresh = None
    while True:
        try:
            req = protocol.recv(sock)
        except (OSError, protocol.ProtocolError, ValueError):
            os._exit(3)
        if req is None or req.get("op") == protocol.Op.EXIT:
            os._exit(0)
        if fresh is None:
            if req.get("op") == protocol.Op.SETUP:
                fresh = _setup(sock, req, context, interp)
            continue
        if req.get("op") != protocol.Op.RUN:
            continue
        nonce = int(req.get("nonce", 0))
        code, limit = str(req.get("code", "")), int(req.get("max_chars", 10_000))
        if fresh:
            frame = fresh_cell(interp, code, limit, nonce, context)
        else:
            if stop_others:
                _signal_others(signal.SIGCONT)
            frame = protocol.encode_result(nonce, interp.run(code, limit))
            if stop_others:
                _signal_others(signal.SIGSTOP)
        try:
            sock.sendall(frame)
        except OSError:
            os._exit(4)


def fresh_cell(interp: Interpreter, code: str, limit: int, nonce: int, context: dict) -> bytes:
    """Run one cell in a forked copy of this untouched interpreter (``context["fork"]``: in
    namespaces of its own where it can, see ``fresh_cell``), then have every trace of it
    gone (``context["clean"]``) and return the result frame it left.

    The child cannot reach the host's socket (closed before any code runs); it writes its
    result into a fresh memfd that this process reads once the child is gone, forwarding
    exactly one frame no larger than the host accepts (anything else reads as a crash)."""
    out = os.memfd_create("result", os.MFD_CLOEXEC)
    try:
        context["arm"]()
        pid = context.get("fork", jail.bare_fork)()
        if pid == 0:
            _child_cell(interp, code, limit, nonce, out, context)
        interp.child = pid
        try:
            _, status = os.waitpid(pid, 0)
        finally:
            interp.child = 0
        context["clean"]()
        frame = _one_frame(out, protocol.result_frame_cap(limit))
    finally:
        os.close(out)
    if frame is None:
        frame = protocol.encode_result(nonce, _death(status, limit))
    return frame


def _child_cell(interp, code: str, limit: int, nonce: int, out: int, context: dict) -> None:
    """The forked child: lock itself down, run the cell, leave its frame in ``out``."""
    try:
        os.close(3)  # the host's socket stays with the template
        context["lock_down"]()
        data = protocol.encode_result(nonce, interp.run(code, limit, new_fds=True))
        view = memoryview(data)
        while view:
            view = view[os.write(out, view):]
    finally:
        os._exit(0)


def _one_frame(fd: int, cap: int) -> bytes | None:
    """The first frame in ``fd`` if it is whole and within ``cap``, else None."""
    head = os.pread(fd, protocol.HEADER.size, 0)
    if len(head) < protocol.HEADER.size:
        return None
    (size,) = protocol.HEADER.unpack(head)
    if size > cap:
        return None
    body = os.pread(fd, size, protocol.HEADER.size)
    return head + body if len(body) == size else None


def _death(status: int, limit: int) -> dict:
    """The reply for a child that left no valid result: how it ended, as the model's outcome."""
    if os.WIFSIGNALED(status):
        try:
            name = signal.Signals(os.WTERMSIG(status)).name
        except ValueError:
            name = f"signal {os.WTERMSIG(status)}"
        why = f"Killed: the interpreter was terminated by {name}."
    else:
        why = (f"Killed: the interpreter process exited with code {os.WEXITSTATUS(status)}"
               " without a valid result.")
    return {"status": "killed", "error": why[:limit], "error_last_line": why[:limit]}
