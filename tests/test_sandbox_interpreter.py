"""Issue 47 item 4: the sandbox's isolation does not depend on how Python was launched, and a
fallback to weaker isolation names its cause and fix.

A venv's python reached through ``..`` (``../repo/.venv/bin/python``) gave ``sys.executable``
a path through the launching folder, which is not bound inside bubblewrap: the fork server
could not start and ``auto`` dropped to weaker isolation with a warning naming neither."""

from __future__ import annotations

import logging
import os
import stat
import sys

import pytest

from tir_envs.tools.python import LocalBackend
from tir_envs.tools.python.pool import launcher
from tir_envs.tools.python.isolation.causes import explain


@pytest.fixture()
def through_dotdot(tmp_path, monkeypatch) -> str:
    """``sys.executable`` as Python sets it when started as ``../<relative>/python`` from a
    folder the sandbox does not bind."""
    here = tmp_path / "elsewhere" / "work"
    here.mkdir(parents=True)
    path = os.path.join(str(here), os.path.relpath(sys.executable, here))
    assert ".." in path and os.path.samefile(path, sys.executable)
    monkeypatch.setattr(sys, "executable", path)
    return path


def _under(path: str, folders: list[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def test_the_interpreter_is_resolved_and_keeps_its_venv_name(through_dotdot):
    python = launcher.interpreter()
    assert ".." not in python.split(os.sep) and os.path.isabs(python)
    assert os.path.samefile(python, through_dotdot)
    assert os.path.basename(python) == os.path.basename(through_dotdot)  # the venv's own link


@pytest.mark.parametrize("mode", ["bwrap", "unshare", "rlimits"])
def test_every_mode_starts_an_interpreter_the_sandbox_binds(through_dotdot, monkeypatch, mode):
    """The command line of each mode (bwrap's built even where it is not installed): the
    interpreter it runs exists, has no ``..`` and lies inside the sandbox's binds."""
    monkeypatch.setattr(launcher, "bwrap_path", lambda: "/usr/bin/bwrap")
    spec = launcher.launch_spec(mode, 3, (), 16)
    argv = spec.argv[spec.argv.index("--") + 1:] if mode == "bwrap" else spec.argv
    python = argv[0]
    assert ".." not in python.split(os.sep) and os.path.isfile(python)
    if mode != "rlimits":  # rlimits runs on the host's filesystem
        binds = launcher.allowed_paths()
        assert _under(os.path.dirname(python), binds), (python, binds)
    if mode == "bwrap":
        bound = [spec.argv[i + 2] for i, a in enumerate(spec.argv) if a == "--ro-bind"]
        assert _under(os.path.dirname(python), bound)


@pytest.mark.parametrize("text, cause", [
    ("bubblewrap (bwrap) is not installed", "not installed"),
    ("bwrap: setting up uid map: Permission denied", "user namespaces"),
    ("bwrap: No permissions to creating new namespace, likely because the kernel does not "
     "allow non-privileged user namespaces", "user namespaces"),
    ("bwrap: Can't mount proc on /newroot/proc: Operation not permitted", "/proc"),
    ("bwrap: execvp /x/../y/bin/python: No such file or directory", "interpreter's path"),
    ("the fork server did not start within 180 s", "too slow"),
])
def test_each_known_failure_is_named_with_its_fix(text, cause):
    words = explain("bwrap", text)
    assert cause in words and "fix:" in words and text[:40] in words


def test_a_fallback_names_the_cause_and_fix(tmp_path, monkeypatch, caplog):
    """bubblewrap present but refused by the kernel: ``auto`` serves in the next mode, and the
    warning and the pool's ``failed_modes`` say why and what to change."""
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\n"
                    "exit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(launcher, "bwrap_path", lambda: str(fake))
    backend = LocalBackend(isolation="auto", spares=0, fork_servers=1, disk_mb=23)
    try:
        with caplog.at_level(logging.WARNING, logger="tir_envs"):
            info = backend.pool.wait_ready(timeout=180)
        assert info["isolation"] in ("unshare", "rlimits")
        why = info["failed_modes"]["bwrap"]
        assert "user namespaces" in why and "fix:" in why
        assert any("cause:" in r.getMessage() and "falling back" in r.getMessage()
                   for r in caplog.records)
    finally:
        backend.shutdown()
