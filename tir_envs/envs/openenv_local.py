"""An ASGI app (an OpenEnv server's) run in this process on a free local port, for
``tir/OpenEnv-v0``'s ``app=``: uvicorn on its own thread, stopped with ``stop()``.

One app object is served by one server however many envs name it (``serve``/``release``,
counted): an app's asyncio objects belong to the loop that first used them, so two servers
(two threads, two loops) of one app break each other's sessions."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any


class LocalServer:
    """``app`` (an ASGI app or ``"module:attr"``) served at ``self.url`` until ``stop()``."""

    def __init__(self, app: Any, startup_timeout_s: float = 60.0):
        import uvicorn

        self.app = _resolve(app)
        # the socket is bound here and handed to uvicorn, so no other server (another env's,
        # started meanwhile) can be given the same free port before this one listens
        self._socket = socket.socket()
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(quiet(self.app), host="127.0.0.1", port=self.port,
                                log_level="warning", lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="openenv-local",
                                        kwargs={"sockets": [self._socket]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + startup_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the OpenEnv app {app!r} did not start on port {self.port}")
            time.sleep(0.02)

    def stop(self) -> None:
        """Stop serving (idempotent)."""
        self._server.should_exit = True
        self._thread.join(10)
        self._socket.close()


def _resolve(app: Any) -> Any:
    if not isinstance(app, str):
        return app
    from tir_envs.user_modules import resolve

    if ":" not in app:
        raise ValueError(f"app={app!r}: expected 'package.module:attr' or an ASGI app")
    return resolve(app, "app=")


def quiet(app: Any) -> Any:
    """``app`` with a client's normal disconnect swallowed (no traceback in the log); every
    other exception still propagates.  ``tir_envs.serving.guard.Guard`` does this too; this
    alone is for an app served in-process on loopback for one env."""
    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            await app(scope, receive, send)
        except Exception as exc:  # noqa: BLE001 - only a normal disconnect is swallowed
            if scope.get("type") != "websocket" or not is_disconnect(exc):
                raise
    return wrapped


def is_disconnect(exc: BaseException) -> bool:
    """Whether ``exc`` only says the client went away (nothing to log)."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & {"WebSocketDisconnect", "ClientDisconnect", "ConnectionClosed",
                "ConnectionClosedOK", "ConnectionClosedError"}:
        return True
    return isinstance(exc, RuntimeError) and ("websocket.close" in str(exc)
                                              or "after sending" in str(exc))


_SHARED: dict[int, tuple[LocalServer, int]] = {}  # id(app) -> (its server, envs using it)
_SHARED_LOCK = threading.Lock()


def serve(app: Any) -> LocalServer:
    """The one server of ``app`` in this process, started on first use."""
    resolved = _resolve(app)
    with _SHARED_LOCK:
        server, users = _SHARED.get(id(resolved), (None, 0))
        if server is None:
            server = LocalServer(resolved)
        _SHARED[id(resolved)] = (server, users + 1)
        return server


def release(server: LocalServer) -> None:
    """One env is done with ``server``: the last one stops it."""
    with _SHARED_LOCK:
        _, users = _SHARED.get(id(server.app), (server, 1))
        if users > 1:
            _SHARED[id(server.app)] = (server, users - 1)
            return
        _SHARED.pop(id(server.app), None)
    server.stop()
