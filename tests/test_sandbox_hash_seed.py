"""Several fork servers per pool, each with its own string-hash secret (issue 21, item 2).

A forked interpreter cannot change its hash secret, so the pool runs ``fork_servers``
servers (separate processes, separate secrets), draws one at random for each session, and
retires a server after ``sessions_per_fork_server`` forks.  Real sandbox processes only.
"""

from __future__ import annotations

import collections
import os
import signal
import time

import pytest

from tests.sandbox_helpers import (NAMESPACE_MODES, alive, backend_or_skip, call,
                                   close_session, open_session, wait_dead, wait_until)
from tir_envs.tools.base import Status
from tir_envs.tools.python import LocalBackend, PythonTool

HASH = "hash('tir')"


def own(mode: str = "auto", **kw) -> LocalBackend:
    """A pool of its own (``disk_mb`` makes its configuration distinct from other tests')."""
    if mode != "auto":
        backend_or_skip(mode)
    kw.setdefault("disk_mb", 23 + len(kw) + os.getpid() % 5)
    return LocalBackend(isolation=mode, **kw)


@pytest.mark.parametrize("mode", NAMESPACE_MODES)
def test_consecutive_episodes_see_different_hash_secrets(mode):
    """40 episodes one after another with 4 fork servers: the secret an episode reads off
    ``hash()`` is, most of the time, not the next one's.

    Not flaky: each open draws its server uniformly among the 4 ready ones and is served by
    that server only (one of its spares, else its next session; before issue 29 another
    server's spare when it had none, about (3/4)^15 = 1.3% of opens).  So an episode lands on
    a given server with probability p = 1/4 (<= 0.26 before), independently of the secrets.  P(some server takes more than
    28 of 40, i.e. over 70%) <= 4 * P(Binomial(40, 0.26) >= 29) = 4.2e-9, and P(fewer than 3
    distinct secrets) <= C(4, 2) * 0.52^40 = 2.6e-11."""
    backend = own(mode, spares=16, fork_servers=4)
    tool = PythonTool(backend=backend)
    one_shot = PythonTool(backend=backend, stateful=False)
    try:
        backend.pool.wait_all_servers(timeout=180)
        # most spares were forked before all four served: hold 16 sessions, so that the
        # spares are refilled by servers drawn among the four
        held = [open_session(tool) for _ in range(16)]
        for s in held:
            close_session(tool, s)
        seen, by_server = [], collections.defaultdict(set)
        for _ in range(40):
            s = open_session(tool)
            r = call(tool, HASH, s)
            assert r.status == Status.OK
            seen.append(r.text)
            by_server[s.handle.fork_server.proc.pid].add(r.text)
            close_session(tool, s)
        counts = collections.Counter(seen)
        assert len(counts) >= 3, counts
        assert max(counts.values()) <= 28, counts
        # one secret per server, a different one in each
        assert all(len(v) == 1 for v in by_server.values()), by_server
        assert len(set().union(*by_server.values())) == len(by_server)
        # one-shot calls too (without the draw they would reuse one template, one secret)
        shots = collections.Counter(call(one_shot, HASH).text for _ in range(40))
        assert len(shots) >= 3 and max(shots.values()) <= 28, shots
    finally:
        backend.shutdown()


def test_servers_retire_and_exit_once_their_sessions_close():
    """With 3 sessions per server: servers retire after at most 3 opened sessions, a session
    of a retired server keeps its state, the server exits only after that session closes,
    and one-shot calls work throughout."""
    backend = own(spares=1, fork_servers=2, sessions_per_fork_server=3)
    tool = PythonTool(backend=backend)
    one_shot = PythonTool(backend=backend, stateful=False)
    seen = set()
    try:
        held = open_session(tool)
        assert call(tool, "kept = 41", held).status == Status.OK
        server = held.handle.fork_server
        for i in range(40):
            s = open_session(tool)
            seen.add(s.handle.fork_server)
            r = call(tool, f"{i} * 2", s)
            assert r.status == Status.OK and r.text == str(2 * i), r.text
            close_session(tool, s)
            r = call(one_shot, f"{i} + 1")
            assert r.status == Status.OK and r.text == str(i + 1), r.text
            if i >= 11 and server.state == "retired":
                break
        info = backend.pool.info()
        assert info["counters"]["fork_servers_retired"] >= 2
        assert server.state == "retired" and alive(server.proc.pid)
        entry = next(s for s in info["fork_servers"] if s["pid"] == server.proc.pid)
        assert entry["state"] == "retired" and entry["live_sessions"] >= 1
        assert 2 <= entry["sessions_opened"] <= 3 <= entry["sessions_forked"] + 1
        assert all(s["sessions_opened"] <= 3 for s in info["fork_servers"])
        assert call(tool, "kept + 1", held).text == "42"  # never killed for retiring
        others = [z for z in seen if z is not server]
        assert wait_until(lambda: all(z.state in ("ready", "exited") for z in others))
        gone = [z for z in others if z.state == "exited"]
        assert gone and all(wait_dead(z.proc.pid) for z in gone)
        close_session(tool, held)
        assert wait_dead(server.proc.pid)
        assert wait_until(lambda: server.state == "exited")
        assert server.proc.pid not in [s["pid"] for s in backend.pool.info()["fork_servers"]]
        assert wait_until(lambda: sum(s["state"] == "serving" for s in
                                      backend.pool.info()["fork_servers"]) == 2)
        assert wait_until(lambda: (lambda i: i["uids_in_use"] <= i["live_sessions"])(
            backend.pool.info()))
    finally:
        backend.shutdown()


@pytest.mark.parametrize("mode", NAMESPACE_MODES)
def test_a_dead_server_loses_only_its_sessions(mode):
    backend = own(mode, spares=4, fork_servers=2)
    tool = PythonTool(backend=backend)
    sessions = []
    try:
        backend.pool.wait_all_servers(timeout=180)
        while len({s.handle.fork_server for s in sessions}) < 2:
            assert len(sessions) < 40, "every session came from one of two servers"
            sessions.append(open_session(tool))
        victim = sessions[0]
        bystander = next(s for s in sessions if s.handle.fork_server is not victim.handle.fork_server)
        assert call(tool, "v = 'victim'", victim).status == Status.OK
        assert call(tool, "v = 'bystander'", bystander).status == Status.OK
        dead = victim.handle.fork_server
        starts = backend.pool.info()["counters"]["fork_server_starts"]
        os.kill(dead.proc.pid, signal.SIGKILL)
        assert wait_dead(dead.proc.pid)
        assert wait_until(lambda: dead.state == "dead")
        r = call(tool, "v", victim)
        assert r.status == Status.INFRA_ERROR, r.text
        r = call(tool, "'back'", victim)
        assert r.status == Status.OK and r.text == "'back'"
        assert victim.handle.fork_server is not dead
        assert call(tool, "v", bystander).text == "'bystander'"
        assert bystander.restarts == 0
        # a replacement starts in the background, and the pool serves with two again
        assert wait_until(lambda: sum(s["state"] == "serving" for s in
                                      backend.pool.info()["fork_servers"]) == 2)
        info = backend.pool.info()
        assert info["counters"]["fork_server_deaths"] == 1
        assert info["counters"]["fork_server_starts"] == starts + 1
    finally:
        for s in sessions:
            close_session(tool, s)
        backend.shutdown()


def test_one_fork_server_behaves_as_before():
    backend = own(spares=2, fork_servers=1)
    tool = PythonTool(backend=backend)
    try:
        backend.pool.wait_ready(timeout=180)
        secrets = set()
        for _ in range(6):
            s = open_session(tool)
            secrets.add(call(tool, HASH, s).text)
            close_session(tool, s)
        time.sleep(1.0)  # nothing starts in the background
        info = backend.pool.info()
        assert len(secrets) == 1
        assert [s["state"] for s in info["fork_servers"]] == ["serving"]
        assert info["counters"]["fork_server_starts"] == 1
    finally:
        backend.shutdown()


@pytest.mark.parametrize("option", ["fork_servers", "sessions_per_fork_server"])
@pytest.mark.parametrize("value", [0, -1, True, 2.5, "4"])
def test_bad_fork_server_settings_are_refused(option, value):
    with pytest.raises(ValueError, match=rf"{option} must be a positive int.*1 or more"):
        LocalBackend(**{option: value})
