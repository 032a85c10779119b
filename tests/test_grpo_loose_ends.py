"""What a new user of the bundled trainer tripped over (issue 35, item 5): rollout dumps of an
abandoned tail mixed into a resumed run, a traceback on Ctrl-C, a progress bar per checkpoint,
and the docs' list of settings a resume may change."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tests.test_grpo_trainer import TOY, config  # noqa: E402
from tir_envs.trainers.grpo.checkpoint import save_checkpoint  # noqa: E402
from tir_envs.trainers.grpo.resume import EXTENSIBLE  # noqa: E402
from tir_envs.trainers.grpo.trainer import GRPOTrainer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_a_resume_sets_aside_dumps_of_steps_past_the_checkpoint(tmp_path):
    GRPOTrainer(config(tmp_path, "train.steps=2", "train.dump_rollouts=true")).train()
    rollouts = tmp_path / "rollouts"
    # the run went on to step 3 and died before its next checkpoint: its dump is an orphan
    orphan = rollouts / "step_00003.jsonl"
    orphan.write_text((rollouts / "step_00002.jsonl").read_text())
    stale = orphan.read_bytes()
    trainer = GRPOTrainer(config(tmp_path, "train.steps=3", "train.dump_rollouts=true"))
    assert not orphan.exists()  # set aside before the resumed run writes step 3 again
    assert (rollouts / "superseded" / "step_00003.jsonl").read_bytes() == stale
    trainer.train()
    assert sorted(p.name for p in rollouts.glob("*.jsonl")) == [
        "step_00001.jsonl", "step_00002.jsonl", "step_00003.jsonl"]
    steps = {json.loads(line)["metadata"]["step"]
             for line in (rollouts / "step_00003.jsonl").read_text().splitlines()}
    assert steps == {3}
    from tir_envs.viewer.sources import load_episodes
    episodes, _ = load_episodes(rollouts)
    assert len(episodes) == 3 * 16  # three steps of 4 tasks x 4 samples, the orphan not mixed in


def test_a_checkpoint_writes_no_progress_bar(tmp_path, capfd):
    trainer = GRPOTrainer(config(tmp_path, "train.steps=1"))
    capfd.readouterr()
    save_checkpoint(tmp_path / "ck", 1, trainer.model, trainer.optimizer, trainer.scheduler, {})
    out, err = capfd.readouterr()
    assert "Writing model shards" not in out + err
    from transformers.utils import logging as hf_logging
    assert hf_logging.is_progress_bar_enabled()  # restored for everything else


def test_ctrl_c_says_where_the_run_stopped_in_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = tmp_path / "stderr.txt"
    with open(log, "w") as stderr:  # files, not pipes: a full pipe would stall the trainer
        proc = subprocess.Popen(
            [sys.executable, "-m", "tir_envs.trainers.grpo", "--config", str(TOY), "train.steps=100000",
             f"train.output_dir={tmp_path / 'run'}", "train.save_every=2",
             "train.tensorboard=false", "rollout.tasks_per_step=4",
             "rollout.samples_per_task=4"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr, text=True)
        try:
            deadline = time.monotonic() + 300
            checkpoints = tmp_path / "run" / "checkpoints"
            while time.monotonic() < deadline:  # a finished checkpoint (keep_last prunes old)
                if any(p.is_dir() for p in checkpoints.glob("step_???????")):
                    break
                time.sleep(0.1)
            else:
                pytest.fail("the toy run wrote no checkpoint in 300 s")
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=120)
        finally:
            proc.kill()
    err = log.read_text()
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err, err[-4000:]
    line = [ln for ln in err.splitlines() if "interrupted at step" in ln]
    assert len(line) == 1, err[-2000:]
    match = re.search(r"interrupted at step (\d+); last checkpoint: step (\d+)", line[0])
    assert match and int(match[1]) >= int(match[2]) >= 2, line[0]
    assert "Rerun the same command" in line[0]


def test_the_docs_list_every_setting_a_resume_may_change():
    text = (ROOT / "docs" / "grpo.md").read_text(encoding="utf-8")
    para = text[text.index("**Settings are pinned on resume.**"):]
    para = para[:para.index("\n- ")]
    missing = [k for k in EXTENSIBLE if f"`{k}`" not in para]
    assert not missing, f"docs/grpo.md's resume paragraph omits {missing}"
