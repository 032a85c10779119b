"""Issue 36 item 6: ``tir-envs rollout`` interrupted says in one line what it saved, and the
same command run again resumes (as ``bench`` does) instead of refusing an existing ``--out``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tir_envs.cli import main
from tir_envs.trajectory import read_jsonl

ROOT = Path(__file__).resolve().parents[1]
SLOW = json.dumps(["```python\nimport time; time.sleep(1.5); print(1)\n```\n```output",
                   "The final answer is \\boxed{1}."])


def _argv(folder: Path) -> list[str]:
    return ["rollout", "--env", "tir/MathCode-v0", "--tasks", "aime24", "--limit", "6",
            "--policy", f"scripted:{folder / 'slow.json'}", "--out", str(folder / "t.jsonl"),
            "--concurrency", "1", "--seed", "3", "--no-progress"]


def _keys(path: Path) -> list[tuple[int, int]]:
    return [(t.metadata["group"], t.metadata["sample"]) for t in read_jsonl(path)]


def test_ctrl_c_then_rerun_resumes(tmp_path):
    (tmp_path / "slow.json").write_text(SLOW)
    out = tmp_path / "t.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "tir_envs.cli", *_argv(tmp_path)],
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and out.read_text().count("\n") >= 2:
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole process group
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    saved = len(_keys(out))
    assert 2 <= saved < 6
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err, err
    assert lines[0] == f"tir-envs rollout: interrupted: {saved} episodes are saved in {out}; " \
                       "resume with:" and "tir-envs rollout --env tir/MathCode-v0" in lines[1]
    assert len(lines) == 2, err
    first = {k: t.to_json() for k, t in zip(_keys(out), read_jsonl(out))}
    code = main(_argv(tmp_path))
    assert code == 0
    keys = _keys(out)
    assert sorted(keys) == [(g, 0) for g in range(6)]  # each episode once
    again = dict(zip(keys, read_jsonl(out)))
    assert all(again[k].to_json() == v for k, v in first.items())  # saved ones kept as they were


def test_a_rerun_with_other_settings_is_refused(tmp_path, capsys):
    (tmp_path / "slow.json").write_text(json.dumps(["The final answer is \\boxed{1}."]))
    argv = _argv(tmp_path)
    assert main(argv) == 0
    argv[argv.index("--limit") + 1] = "4"
    assert main(argv) == 2
    assert "limit: 6 then, 4 now" in capsys.readouterr().err
    assert main([*argv, "--overwrite"]) == 0
    assert len(read_jsonl(tmp_path / "t.jsonl")) == 4


def test_a_finished_run_rerun_runs_nothing(tmp_path, capsys):
    (tmp_path / "slow.json").write_text(json.dumps(["The final answer is \\boxed{1}."]))
    assert main(_argv(tmp_path)) == 0
    before = (tmp_path / "t.jsonl").read_text()
    capsys.readouterr()
    assert main(_argv(tmp_path)) == 0
    assert (tmp_path / "t.jsonl").read_text() == before
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary["resumed"] == 6 and summary["episodes_in_out"] == 6
    assert summary["mean_reward"] is not None  # over the file, not the (empty) new session


def test_a_line_cut_by_the_interruption_is_dropped(tmp_path):
    (tmp_path / "slow.json").write_text(json.dumps(["The final answer is \\boxed{1}."]))
    argv = _argv(tmp_path)
    assert main(argv) == 0
    out = tmp_path / "t.jsonl"
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:3]) + lines[3][:50])  # as a kill mid-write leaves it
    assert main(argv) == 0
    assert sorted(_keys(out)) == [(g, 0) for g in range(6)]
