"""The run folder: one writer at a time, settings checked before anything is written or loaded,
the policy's content pinned, Ctrl-C telling what is saved and how to resume."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tir_envs.bench import run
from tir_envs.bench.oracle import oracle
from tir_envs.bench.store import RunFolderError, RunStore
from tir_envs.cli import main

ROOT = Path(__file__).resolve().parents[1]

#: ``bench --policy oracle``, but each sample takes 0.2 s and the first says it has started
SLOW_RUN = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    import tir_envs.bench.oracle
    from tir_envs.bench import run

    fast = tir_envs.bench.oracle.oracle

    class Slow:
        def __init__(self, *args):
            self.inner = fast(*args)
        async def generate_job(self, job, prompt_ids, stop, sampling):
            Path(sys.argv[2]).touch()
            await asyncio.sleep(0.2)
            return await self.inner.generate_job(job, prompt_ids, stop, sampling)

    tir_envs.bench.oracle.oracle = Slow
    run("aime24", "oracle", out=sys.argv[1], k=1, concurrency=1, progress=False)
""")


def _python(*args: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def _bench_cli(out: Path) -> subprocess.Popen:
    return _python("-m", "tir_envs.cli", "bench", "--suite", "aime24", "--policy", "oracle",
                   "--out", str(out), "--no-progress")


def _saved(folder: Path) -> int:
    path = folder / "samples.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _wait_for(path: Path, proc: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.time() + seconds
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, "the first bench process never started sampling"
        time.sleep(0.05)


def test_a_second_process_on_the_same_folder_refuses_at_once_and_a_dead_holders_lock_is_taken(
        tmp_path):
    out, started = tmp_path / "run", tmp_path / "started"
    holder = _python("-c", SLOW_RUN, str(out), str(started))
    try:
        _wait_for(started, holder)
        deadline = time.time() + 120
        while _saved(out) < 3:  # records reach the disk every 0.5 s: some are saved
            assert holder.poll() is None and time.time() < deadline, holder.communicate()
            time.sleep(0.05)
        t0 = time.time()
        second = _bench_cli(out)
        _, err = second.communicate(timeout=120)
        assert second.returncode == 1
        assert f"is in use by pid {holder.pid} on host {socket.gethostname()}" in err
        assert time.time() - t0 < 60  # refused before any sample ran (no 30 x 0.2 s wait)
    finally:
        holder.send_signal(signal.SIGKILL)  # dies holding the lock: its record stays behind
        holder.wait()
    assert json.loads((out / ".lock").read_text())["pid"] == holder.pid
    before = RunStore(out).records
    assert 0 < len(before) < 30
    taker = _bench_cli(out)
    stdout, err = taker.communicate(timeout=300)
    assert taker.returncode == 0, err
    assert f"took over the lock of pid {holder.pid} on host {socket.gethostname()}" in err
    assert json.loads(stdout.strip().splitlines()[-1])["accuracy_pct"]["aime24"] == 100.0
    lines = (out / "samples.jsonl").read_text().splitlines()
    keys = [(r["item"], r["sample"]) for r in map(json.loads, lines)]
    assert sorted(keys) == [(i, 0) for i in range(30)]  # every sample once: no double work
    assert (out / ".lock").read_text() == ""  # released cleanly


def test_two_runs_started_together_never_both_write(tmp_path):
    out = tmp_path / "run"
    procs = [_bench_cli(out) for _ in range(2)]
    results = [p.communicate(timeout=300) + (p.returncode,) for p in procs]
    codes = sorted(rc for _, _, rc in results)
    assert codes == [0, 1], results
    loser = next(err for _, err, rc in results if rc == 1)
    assert "is in use by pid" in loser
    lines = (out / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 30


# ------------------------------------------------------------------------------ validation
def test_a_bad_protocol_is_refused_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["bench", "--suite", "aime24", "--policy", "oracle", "--protocol", "tor",
                 "--out", str(out), "--no-progress"]) == 1
    assert "unknown protocol 'tor'; the math protocols are rite, torl, zerotir" in \
        capsys.readouterr().err
    assert not out.exists()  # the corrected command starts clean
    assert main(["bench", "--suite", "aime24", "--policy", "oracle", "--protocol", "torl",
                 "--limit", "2", "--out", str(out), "--no-progress"]) == 0


@pytest.mark.parametrize("argv, message", [
    (["--env-arg", "tasks=mine.jsonl"], "env argument 'tasks' would be ignored"),
    (["--env-arg", "max_turn=3"], "takes no env argument(s) ['max_turn']"),
    (["--policy", "scripted:/nope.json"], "no such file"),
    (["--policy", "openai:http://127.0.0.1:1/v1"], "needs --model"),
    (["--policy", "scripted:X", "--max-model-len", "4096"], "apply only to vllm:PATH"),
])
def test_other_bad_settings_are_refused_before_anything_is_written(tmp_path, capsys, argv,
                                                                      message):
    out = tmp_path / "run"
    policy = [] if "--policy" in argv else ["--policy", "oracle"]
    if "scripted:X" in argv:
        (tmp_path / "x.json").write_text('["a"]')
        argv = [a.replace("scripted:X", f"scripted:{tmp_path / 'x.json'}") for a in argv]
    code = main(["bench", "--suite", "aime24", *policy, *argv, "--out", str(out),
                 "--no-progress"])
    assert code in (1, 2) and message in capsys.readouterr().err
    assert not out.exists()


def test_a_changed_setting_is_refused_before_the_model_loads(tmp_path, monkeypatch):
    import tir_envs.rollout.specs as specs

    run("aime24", oracle(), out=tmp_path, k=1, limit=1, progress=False, report=False)
    loaded = []

    def load(*args, **kwargs):
        loaded.append(args)
        raise RuntimeError("weights loading")

    monkeypatch.setattr(specs, "build_policy", load)
    model = tmp_path / "model"
    model.mkdir()
    with pytest.raises(RunFolderError, match="k: 1 in the folder, 2 now"):
        run("aime24", f"hf:{model}", out=tmp_path, k=2, limit=1, progress=False)
    assert loaded == []
    with pytest.raises(RuntimeError, match="weights loading"):  # a fresh folder does load
        run("aime24", f"hf:{model}", out=tmp_path / "fresh", k=2, limit=1, progress=False)
    assert len(loaded) == 1


# ------------------------------------------------------------------------------ pins
def test_an_edited_scripted_policy_cannot_join_its_run(tmp_path, capsys):
    script, out = tmp_path / "script.json", tmp_path / "run"
    script.write_text(json.dumps(["<think>x</think>\n<answer>xyzzy</answer>"]))
    argv = ["bench", "--suite", "bamboogle", "--policy", f"scripted:{script}", "--limit", "2",
            "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    pin = json.loads((out / "run.json").read_text())["policy_pin"]
    assert pin["kind"] == "scripted" and len(pin["sha256"]) == 64
    script.write_text(json.dumps(["<think>x</think>\n<answer>Paris</answer>"]))
    capsys.readouterr()
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "the policy changed since this run began" in err and pin["sha256"] in err


def test_a_model_folder_is_pinned_by_config_tokenizer_and_weight_files(tmp_path):
    from tir_envs.bench.pins import pin_diff, policy_pin

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"hidden_size": 64}')
    (model / "model.safetensors").write_bytes(b"\0" * 100)
    first = policy_pin(f"hf:{model}")
    assert first["weights"] == {"model.safetensors": 100}
    (model / "model.safetensors").write_bytes(b"\0" * 120)  # swapped weights
    second = policy_pin(f"hf:{model}")
    assert "model.safetensors: 100 then, 120 now" in pin_diff(first, second)
    (model / "config.json").write_text('{"hidden_size": 128}')
    assert "config.json" in pin_diff(second, policy_pin(f"hf:{model}"))
    assert policy_pin("openai:http://x/v1") is None and policy_pin("oracle") is None


# ------------------------------------------------------------------------------ Ctrl-C
def test_ctrl_c_says_how_much_is_saved_and_how_to_resume(tmp_path):
    out, script = tmp_path / "run", tmp_path / "s.json"
    script.write_text(json.dumps(["The final answer is $\\boxed{1}$."]))
    proc = _python("-m", "tir_envs.cli", "bench", "--suite", "gsm8k", "--policy",
                   f"scripted:{script}", "--out", str(out), "--no-progress", "--concurrency", "1")
    deadline = time.time() + 120
    while not (out / "samples.jsonl").exists() or \
            len((out / "samples.jsonl").read_text().splitlines()) < 5:
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    saved = len(RunStore(out).records)
    assert 5 <= saved < 1319
    assert f"interrupted: {saved} of 1319 samples are saved in {out}; resume with:" in err
    assert f"tir-envs bench --suite gsm8k --policy scripted:{script} --out {out}" in err
