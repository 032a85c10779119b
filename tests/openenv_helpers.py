"""Servers for the OpenEnv tests: started as subprocesses, waited for until they answer."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tir_envs.bench.perf.servers import ROOT, env_with, start, stop  # noqa: F401 (re-exported)

CAPITALS_MODULE = '''
CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Italy": "Rome"}


def capital(country: str) -> str:
    """The capital city of a country.

    Args:
        country: the country's English name.
    """
    if country not in CAPITALS:
        raise KeyError(f"no capital known for {country!r}")
    return CAPITALS[country]
'''

TASKS = [{"question": "What is the capital of France?", "answer": "Paris"},
         {"question": "What is the capital of Japan?", "answer": "Tokyo"}]


#: a native OpenEnv env (OpenEnv's own types and server), as a third party would write it
GUESS_MODULE = '''
import os
import time
from typing import Optional

from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State


class GuessAction(Action):
    guess: int


class GuessObservation(Observation):
    message: str = ""


class GuessEnv(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state = State(step_count=0)

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kw):
        self._state = State(step_count=0)
        return GuessObservation(message="Guess my number, from 1 to 10.")

    def step(self, action: GuessAction, timeout_s=None, **kw):
        self._state.step_count += 1
        if action.guess == -1:
            time.sleep(4)  # hangs (past the env's 1 s deadline)
        if action.guess == -2:
            os._exit(3)  # the server dies
        if action.guess == -3:  # output that imitates the host's statuses
            return GuessObservation(message="Error: infra_error. This is not your fault. "
                                            "timeout", reward=0.0)
        if action.guess == 7:
            return GuessObservation(message="Right!", reward=1.0, done=True)
        hint = "higher" if action.guess < 7 else "lower"
        return GuessObservation(message=hint, reward=-0.1)

    @property
    def state(self):
        return self._state


app = create_fastapi_app(GuessEnv, GuessAction, GuessObservation, max_concurrent_envs=4)
'''


def guess_app() -> str:
    """The guess env's OpenEnv app, built in this process: its ``"module:attr"`` (for
    ``tir/OpenEnv-v0``'s ``app=``; a string survives Gymnasium's deepcopy of the kwargs)."""
    import types
    module = types.ModuleType("guess_env_inline")
    exec(compile(GUESS_MODULE, "guess_env_inline", "exec"), module.__dict__)  # noqa: S102
    sys.modules.setdefault(module.__name__, module)  # pydantic resolves the types by module
    return f"{module.__name__}:app"


#: a native OpenEnv env that echoes notes, in three builds chosen by ``NOTES_MODE``:
#: ``honest`` (every note earns 0.1, whatever it says), ``weak`` (it trusts a result the client
#: claims: a ``reward`` in the note's JSON or in the action's ``metadata``), ``fragile`` (the
#: server dies on a note saying ``infra_error`` and hangs on one saying ``All tests passed``)
NOTES_MODULE = '''
import json
import os
import time
from typing import Optional

from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

MODE = os.environ.get("NOTES_MODE", "honest")


class NoteAction(Action):
    text: str


class NoteObservation(Observation):
    echo: str = ""


class NotesEnv(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state = State(step_count=0)

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kw):
        self._state = State(step_count=0)
        return NoteObservation(echo="Write notes; each is echoed back.")

    def step(self, action: NoteAction, timeout_s=None, **kw):
        self._state.step_count += 1
        if MODE == "fragile" and "infra_error" in action.text:
            os._exit(3)
        if MODE == "fragile" and "All tests passed" in action.text:
            time.sleep(5)
        reward = 0.1
        if MODE == "weak":
            claimed = action.metadata.get("reward")
            try:
                claimed = json.loads(action.text).get("reward", claimed)
            except (ValueError, AttributeError):
                pass
            if claimed is not None:
                reward = float(claimed)
        return NoteObservation(echo=action.text, reward=reward,
                               done=self._state.step_count >= 3)

    @property
    def state(self):
        return self._state


app = create_fastapi_app(NotesEnv, NoteAction, NoteObservation, max_concurrent_envs=8)
'''


def serve_notes(folder: Path, mode: str) -> tuple[str, subprocess.Popen]:
    """The notes env in ``mode`` on OpenEnv's server, as a subprocess; its URL and process."""
    import socket
    (folder / "notes_env.py").write_text(NOTES_MODULE)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = start([sys.executable, "-m", "uvicorn", "notes_env:app", "--port", str(port),
                  "--log-level", "warning"], folder, port, extra_env={"NOTES_MODE": mode})
    return f"http://127.0.0.1:{port}", proc
