"""An ASGI app (an OpenEnv server's) run in this process on a free local port, for
``tir/OpenEnv-v0``'s ``app=``: uvicorn on its own thread, stopped with ``stop()``."""

from __future__ import annotations

import importlib
import socket
import threading
import time
from typing import Any


class LocalServer:
    """``app`` (an ASGI app or ``"module:attr"``) served at ``self.url`` until ``stop()``."""

    def __init__(self, app: Any, startup_timeout_s: float = 60.0):
        import uvicorn

        self.app = _resolve(app)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port,
                                log_level="warning", lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="openenv-local",
                                        daemon=True)
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


def _resolve(app: Any) -> Any:
    if not isinstance(app, str):
        return app
    module, sep, attr = app.partition(":")
    if not sep:
        raise ValueError(f"app={app!r}: expected 'package.module:attr' or an ASGI app")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
